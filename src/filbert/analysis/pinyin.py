"""Chinese typed as pinyin: the speller (search/spelling.py) and autocomplete
(suggest/suggester.py) read `wangluo peizhi` as 网络配置.

Pinyin is typed without tones, ü as v (lv, nve), the syllables run together or spaced
(`wangluopeizhi`, `wangluo peizhi`, `wang luo pei zhi`). `reads_as_pinyin` tells whether
letters are such syllables (SYLLABLES: the toneless syllables of pypinyin's readings, less
the interjections m, n and hm); `syllables_of` gives a Han word's (pypinyin: its phrase
dictionary reads heteronyms in context, 行 in 银行 hang), `spelt_in_pinyin` a text's with each
Han character as its syllable. PinyinWords holds words by their syllables, the best of each
(most pages), and spells typed letters as the fewest of its words (a dynamic program over the
letters: a space typed is a syllable boundary, which a word may span at a cost); a syllable
none of them spells (a single character: 的, 了) is left out.

pypinyin loads its dictionaries (0.3 s) on the first use, not on import.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from itertools import accumulate
from typing import Any

from filbert.analysis.analyzers import HAN

# the toneless syllables of pypinyin's readings (ü as v), but the interjections m, n, hm
_TABLE = """
    a ai an ang ao e ei en eng er o ou
    ba bai ban bang bao bei ben beng bi bian biang biao bie bin bing bo bong bu
    ca cai can cang cao ce cei cen ceng cha chai chan chang chao che chen cheng chi chong
    chou chu chua chuai chuan chuang chui chun chuo ci cong cou cu cuan cui cun cuo
    da dai dan dang dao de den deng di dian diao die din ding diu dong dou du duan dui dun duo
    fa fan fang fei fen feng fiao fo fou fu
    ga gai gan gang gao ge gei gen geng gong gou gu gua guai guan guang gui gun guo
    ha hai han hang hao he hei hen heng hong hou hu hua huai huan huang hui hun huo
    ji jia jian jiang jiao jie jin jing jiong jiu ju juan jue jun
    ka kai kan kang kao ke ken keng kong kou ku kua kuai kuan kuang kui kun kuo
    la lai lan lang lao le lei leng li lia lian liang liao lie lin ling liu lo long lou lu
    luan lun luo lv lve
    ma mai man mang mao me mei men meng mi mian miao mie min ming miu mo mou mu
    na nai nan nang nao ne nei nen neng ni nian niang niao nie nin ning niu nong nou nu nuan
    nun nuo nv nve
    pa pai pan pang pao pei pen peng pi pian piao pie pin ping po pou pu
    qi qia qian qiang qiao qie qin qing qiong qiu qu quan que qun
    ran rang rao re ren reng ri rong rou ru rua ruan rui run ruo
    sa sai san sang sao se sen seng sha shai shan shang shao she shen sheng shi shou shu shua
    shuai shuan shuang shui shun shuo si song sou su suan sui sun suo
    ta tai tan tang tao te teng ti tian tiao tie ting tong tou tu tuan tui tun tuo
    wa wai wan wang wei wen weng wo wong wu
    xi xia xian xiang xiao xie xin xing xiong xiu xu xuan xue xun
    ya yan yang yao ye yi yin ying yo yong you yu yuan yue yun
    za zai zan zang zao ze zei zen zeng zha zhai zhan zhang zhao zhe zhen zheng zhi zhong
    zhou zhu zhua zhuai zhuan zhuang zhui zhun zhuo zi zong zou zu zuan zui zun zuo
"""
SYLLABLES = frozenset(_TABLE.split())
LONGEST = max(map(len, SYLLABLES))  # 6: chuang, shuang, zhuang
STARTS = frozenset(s[:i] for s in SYLLABLES for i in range(1, len(s) + 1))  # and prefixes
PINYIN = re.compile(r"[a-z]+(?: [a-z]+)*")  # what may be pinyin: lower-case letters, spaces
HAN_WORD = re.compile(f"[{HAN}]+")
SKIPPED = 1.0  # a syllable left out costs as much as a word...
SPANNED = 0.5  # ...and a word half as much more for each space typed between its syllables
KEPT = 0.1  # a typed word kept as typed weighs as a word on fewer than 1 page (a tie breaker)
# the tone marks of pypinyin's readings, off
TONELESS = str.maketrans(
    {
        marked: plain
        for plain, marks in {
            "a": "āáǎà",
            "e": "ēéěèê",
            "i": "īíǐì",
            "o": "ōóǒò",
            "u": "ūúǔù",
            "v": "üǖǘǚǜ",
            "n": "ńňǹ",
            "m": "ḿ",
        }.items()
        for marked in marks
    }
)


def reads_as_pinyin(text: str, partial: bool = False) -> bool:
    """Whether `text` (lower-case letters, single spaces) is pinyin syllables, each word of
    it a whole number of them; `partial`: the last may be cut short (a prefix typed)."""
    if not PINYIN.fullmatch(text):
        return False
    words = text.split(" ")
    return all(_segments(word, partial and i == len(words) - 1) for i, word in enumerate(words))


def _segments(letters: str, partial: bool) -> bool:
    """Whether the letters are whole syllables (the last possibly cut short)."""
    reached = [True] + [False] * len(letters)
    for i in range(len(letters)):
        if not reached[i]:
            continue
        for j in range(i + 1, min(len(letters), i + LONGEST) + 1):
            piece = letters[i:j]
            if piece in SYLLABLES or (partial and j == len(letters) and piece in STARTS):
                reached[j] = True
    return reached[-1]


@functools.cache
def _pypinyin() -> tuple[dict[str, Any], dict[int, str], Any]:
    from pypinyin import lazy_pinyin
    from pypinyin.constants import PHRASES_DICT, PINYIN_DICT

    return PHRASES_DICT, PINYIN_DICT, lazy_pinyin


def syllables_of(word: str) -> tuple[str, ...] | None:
    """The toneless pinyin syllables of a Han word (one a character: pypinyin's phrase
    dictionary's reading of the word, else each character's first reading, else pypinyin's
    own segmentation into phrases for a longer word); None for a character without one."""
    phrases, characters, lazy_pinyin = _pypinyin()
    readings = phrases.get(word)
    if readings is not None and len(readings) == len(word):
        found = [reading[0].translate(TONELESS) for reading in readings]
    elif len(word) <= 2:
        firsts = [characters.get(ord(c), "").split(",", 1)[0] for c in word]
        found = [reading.translate(TONELESS) for reading in firsts]
    else:
        found = lazy_pinyin(word, errors=lambda chars: ["?"] * len(chars))
    if len(found) != len(word) or not all(s in SYLLABLES for s in found):
        return None
    return tuple(found)


def spelt_in_pinyin(text: str) -> tuple[str, list[int]]:
    """A text with each Han character as its syllable (read in context: `syllables_of` each
    run) and without whitespace, and where each character of the text (and its end) is in
    it. A Han run of a character pypinyin cannot read stays as it is."""
    out: list[str] = []
    at: list[int] = []
    length, end = 0, 0
    for run in [*HAN_WORD.finditer(text), None]:
        start = len(text) if run is None else run.start()
        for char in text[end:start]:
            at.append(length)
            if not char.isspace():
                out.append(char)
                length += len(char)
        if run is None:
            break
        readings = syllables_of(run.group()) or tuple(run.group())
        for syllable in readings:
            at.append(length)
            out.append(syllable)
            length += len(syllable)
        end = run.end()
    at.append(length)
    return "".join(out), at


@dataclass(frozen=True)
class _Spelling:
    boundaries: frozenset[int]  # where the word's syllables meet, in its letters
    word: str
    pages: int


class PinyinWords:
    """Han words by the letters of their syllables, the one on most pages of each way of
    syllabifying them (xian: 先 and 西安 xi|an are two)."""

    def __init__(self, by_letters: dict[str, list[_Spelling]]):
        self.by_letters = by_letters
        self.longest = max(map(len, by_letters), default=0)

    def __len__(self) -> int:
        return sum(map(len, self.by_letters.values()))

    @classmethod
    def build(cls, words: Iterable[str], pages: Iterable[int]) -> PinyinWords:
        """From Han words and the pages of each (other words are left out)."""
        best: dict[tuple[str, ...], tuple[int, str]] = {}
        for word, count in zip(words, pages):
            if not HAN_WORD.fullmatch(word):
                continue
            syllables = syllables_of(word)
            if syllables is not None and (syllables not in best or best[syllables][0] < count):
                best[syllables] = (count, word)
        by_letters: dict[str, list[_Spelling]] = {}
        for syllables, (count, word) in best.items():
            boundaries = frozenset(accumulate(map(len, syllables[:-1])))
            spelling = _Spelling(boundaries, word, count)
            by_letters.setdefault("".join(syllables), []).append(spelling)
        return cls(by_letters)

    def spell(
        self, words: Sequence[str], known: Sequence[bool] = ()
    ) -> list[tuple[str, int, int]] | None:
        """The words of the index that typed pinyin words (lower-case, each read as
        syllables) spell, as (word, start, end) in their letters run together; a typed
        word `known` (to the index as typed: debian, not de|bian) may stay as it is. The
        fewest words (a word over a typed space counts half a word more: spaces typed are
        more often between words), then those on the most pages; None when they spell none."""
        letters = "".join(words)
        ends = [sum(map(len, words[: i + 1])) for i in range(len(words))]
        spaces = set(ends[:-1])
        kept = {end - len(word): (end, word) for word, end, k in zip(words, ends, known) if k}
        n = len(letters)
        # best[j]: (cost, -log pages, the step's start, its word or "" for a syllable left out)
        best: list[tuple[float, float, int, str] | None] = [None] * (n + 1)
        best[0] = (0.0, 0.0, -1, "")
        for i in range(n):
            here = best[i]
            if here is None:
                continue
            steps: list[tuple[int, float, float, str]] = []  # (end, cost, weight, word)
            if i in kept:  # (a syllable is rather left out: de, you)
                steps.append((kept[i][0], 1.0, KEPT, kept[i][1]))
            for j in range(i + 1, min(n, i + max(self.longest, LONGEST)) + 1):
                inside = {space - i for space in spaces if i < space < j}
                cost = 1.0 + SPANNED * len(inside)
                steps += [
                    (j, cost, -math.log(s.pages), s.word)
                    for s in self.by_letters.get(letters[i:j], ())
                    if inside <= s.boundaries
                ]
                if not inside and letters[i:j] in SYLLABLES:
                    steps.append((j, SKIPPED, 0.0, ""))
            for j, cost, weight, word in steps:
                step = (here[0] + cost, here[1] + weight, i, word)
                there = best[j]
                if there is None or step[:2] < there[:2]:
                    best[j] = step
        found: list[tuple[str, int, int]] = []
        j = n
        while j > 0 and (back := best[j]) is not None:
            if back[3]:
                found.append((back[3], back[2], j))
            j = back[2]
        if j or not any(HAN_WORD.fullmatch(word) for word, _, _ in found):
            return None  # spelt no Chinese word
        return found[::-1]
