# The test cases in the first part of this file (up to "filbert's own tests") are ported
# from Google's robots.txt parser test suite, robots_test.cc in
# https://github.com/google/robotstxt, Copyright 2019 Google LLC, licensed under the
# Apache License, Version 2.0 (https://www.apache.org/licenses/LICENSE-2.0).
# Changes: translated from C++/gtest to Python/pytest; RobotsMatcher, ParseRobotsTxt,
# GetPathParamsQuery and MaybeEscapePattern map to filbert.fetch.robots functions.
"""robots.txt parsing and matching (RFC 9309, Google's robotstxt semantics): Google's own
test suite, ported; then filbert's: what each HTTP status of robots.txt means, crawl delays
and sitemaps, byte order marks, typos, wildcards and anchors, pathological patterns and large,
truncated or garbage files parsed quickly and without raising, and the per-rules caches."""

from __future__ import annotations

import math
import random
import time

import pytest

from filbert.fetch.robots import (
    ALLOW,
    DISALLOW,
    MAX_LINE_LEN,
    SITEMAP,
    USER_AGENT,
    RobotRules,
    RobotsCache,
    RobotsTxt,
    get_path_params_query,
    is_valid_user_agent_to_obey,
    maybe_escape_pattern,
    parse_directives,
    rules_from_response,
)


def is_user_agent_allowed(robotstxt: str | bytes, useragent: str, url: str) -> bool:
    body = robotstxt.encode("utf-8") if isinstance(robotstxt, str) else robotstxt
    return rules_from_response(200, body).allowed(url, useragent)


# ---------------------------------------------------------------------------------
# Ported from google/robotstxt robots_test.cc (Apache-2.0)
# ---------------------------------------------------------------------------------


# Google-specific: system test.
def test_google_only_system_test():
    robotstxt = "user-agent: FooBot\ndisallow: /\n"
    # Empty robots.txt: everything allowed.
    assert is_user_agent_allowed("", "FooBot", "")
    # Empty user-agent to be matched: everything allowed.
    assert is_user_agent_allowed(robotstxt, "", "")
    # Empty url: implicitly disallowed, see method comment for GetPathParamsQuery in robots.cc.
    assert not is_user_agent_allowed(robotstxt, "FooBot", "")
    # All params empty: same as robots.txt empty, everything allowed.
    assert is_user_agent_allowed("", "", "")


# Rules are colon separated name-value pairs. Google specific: webmasters sometimes miss
# the colon separator, but it's obvious what they mean by "disallow /", so we assume the
# colon if it's missing.
def test_id_line_syntax_line():
    robotstxt_correct = "user-agent: FooBot\ndisallow: /\n"
    robotstxt_incorrect = "foo: FooBot\nbar: /\n"
    robotstxt_incorrect_accepted = "user-agent FooBot\ndisallow /\n"
    url = "http://foo.bar/x/y"
    assert not is_user_agent_allowed(robotstxt_correct, "FooBot", url)
    assert is_user_agent_allowed(robotstxt_incorrect, "FooBot", url)
    assert not is_user_agent_allowed(robotstxt_incorrect_accepted, "FooBot", url)


# A group is one or more user-agent line followed by rules, and terminated by another
# user-agent line. Rules for same user-agents are combined opaquely into one group. Rules
# outside groups are ignored.
def test_id_line_syntax_groups():
    robotstxt = (
        "allow: /foo/bar/\n"
        "\n"
        "user-agent: FooBot\n"
        "disallow: /\n"
        "allow: /x/\n"
        "user-agent: BarBot\n"
        "disallow: /\n"
        "allow: /y/\n"
        "\n"
        "\n"
        "allow: /w/\n"
        "user-agent: BazBot\n"
        "\n"
        "user-agent: FooBot\n"
        "allow: /z/\n"
        "disallow: /\n"
    )
    url_w = "http://foo.bar/w/a"
    url_x = "http://foo.bar/x/b"
    url_y = "http://foo.bar/y/c"
    url_z = "http://foo.bar/z/d"
    url_foo = "http://foo.bar/foo/bar/"

    assert is_user_agent_allowed(robotstxt, "FooBot", url_x)
    assert is_user_agent_allowed(robotstxt, "FooBot", url_z)
    assert not is_user_agent_allowed(robotstxt, "FooBot", url_y)
    assert is_user_agent_allowed(robotstxt, "BarBot", url_y)
    assert is_user_agent_allowed(robotstxt, "BarBot", url_w)
    assert not is_user_agent_allowed(robotstxt, "BarBot", url_z)
    assert is_user_agent_allowed(robotstxt, "BazBot", url_z)

    # Lines with rules outside groups are ignored.
    assert not is_user_agent_allowed(robotstxt, "FooBot", url_foo)
    assert not is_user_agent_allowed(robotstxt, "BarBot", url_foo)
    assert not is_user_agent_allowed(robotstxt, "BazBot", url_foo)


# REP lines are case insensitive.
def test_id_rep_line_names_case_insensitive():
    robotstxt_upper = "USER-AGENT: FooBot\nALLOW: /x/\nDISALLOW: /\n"
    robotstxt_lower = "user-agent: FooBot\nallow: /x/\ndisallow: /\n"
    robotstxt_camel = "uSeR-aGeNt: FooBot\nAlLoW: /x/\ndIsAlLoW: /\n"
    url_allowed = "http://foo.bar/x/y"
    url_disallowed = "http://foo.bar/a/b"

    assert is_user_agent_allowed(robotstxt_upper, "FooBot", url_allowed)
    assert is_user_agent_allowed(robotstxt_lower, "FooBot", url_allowed)
    assert is_user_agent_allowed(robotstxt_camel, "FooBot", url_allowed)
    assert not is_user_agent_allowed(robotstxt_upper, "FooBot", url_disallowed)
    assert not is_user_agent_allowed(robotstxt_lower, "FooBot", url_disallowed)
    assert not is_user_agent_allowed(robotstxt_camel, "FooBot", url_disallowed)


# A user-agent line is expected to contain only [a-zA-Z_-] characters and must not be empty.
def test_id_verify_valid_user_agents_to_obey():
    assert is_valid_user_agent_to_obey("Foobot")
    assert is_valid_user_agent_to_obey("Foobot-Bar")
    assert is_valid_user_agent_to_obey("Foo_Bar")

    assert not is_valid_user_agent_to_obey(None)  # absl::string_view()
    assert not is_valid_user_agent_to_obey("")
    assert not is_valid_user_agent_to_obey("ツ")

    assert not is_valid_user_agent_to_obey("Foobot*")
    assert not is_valid_user_agent_to_obey(" Foobot ")
    assert not is_valid_user_agent_to_obey("Foobot/2.1")

    assert not is_valid_user_agent_to_obey("Foobot Bar")


# User-agent line values are case insensitive.
def test_id_user_agent_value_case_insensitive():
    robotstxt_upper = "User-Agent: FOO BAR\nAllow: /x/\nDisallow: /\n"
    robotstxt_lower = "User-Agent: foo bar\nAllow: /x/\nDisallow: /\n"
    robotstxt_camel = "User-Agent: FoO bAr\nAllow: /x/\nDisallow: /\n"
    url_allowed = "http://foo.bar/x/y"
    url_disallowed = "http://foo.bar/a/b"

    assert is_user_agent_allowed(robotstxt_upper, "Foo", url_allowed)
    assert is_user_agent_allowed(robotstxt_lower, "Foo", url_allowed)
    assert is_user_agent_allowed(robotstxt_camel, "Foo", url_allowed)
    assert not is_user_agent_allowed(robotstxt_upper, "Foo", url_disallowed)
    assert not is_user_agent_allowed(robotstxt_lower, "Foo", url_disallowed)
    assert not is_user_agent_allowed(robotstxt_camel, "Foo", url_disallowed)
    assert is_user_agent_allowed(robotstxt_upper, "foo", url_allowed)
    assert is_user_agent_allowed(robotstxt_lower, "foo", url_allowed)
    assert is_user_agent_allowed(robotstxt_camel, "foo", url_allowed)
    assert not is_user_agent_allowed(robotstxt_upper, "foo", url_disallowed)
    assert not is_user_agent_allowed(robotstxt_lower, "foo", url_disallowed)
    assert not is_user_agent_allowed(robotstxt_camel, "foo", url_disallowed)


# Google specific: accept user-agent value up to the first space. Space is not allowed in
# user-agent values, but that doesn't stop webmasters from using them. This is more
# restrictive than the I-D, since in case of the bad value "Googlebot Images" we'd still
# obey the rules with "Googlebot".
def test_google_only_accept_user_agent_up_to_first_space():
    assert not is_valid_user_agent_to_obey("Foobot Bar")
    robotstxt = "User-Agent: *\nDisallow: /\nUser-Agent: Foo Bar\nAllow: /x/\nDisallow: /\n"
    url = "http://foo.bar/x/y"
    assert is_user_agent_allowed(robotstxt, "Foo", url)
    assert not is_user_agent_allowed(robotstxt, "Foo Bar", url)


# If no group matches the user-agent, crawlers must obey the first group with a user-agent
# line with a "*" value, if present. If no group satisfies either condition, or no groups
# are present at all, no rules apply.
def test_id_global_groups_secondary():
    robotstxt_empty = ""
    robotstxt_global = "user-agent: *\nallow: /\nuser-agent: FooBot\ndisallow: /\n"
    robotstxt_only_specific = (
        "user-agent: FooBot\n"
        "allow: /\n"
        "user-agent: BarBot\n"
        "disallow: /\n"
        "user-agent: BazBot\n"
        "disallow: /\n"
    )
    url = "http://foo.bar/x/y"
    assert is_user_agent_allowed(robotstxt_empty, "FooBot", url)
    assert not is_user_agent_allowed(robotstxt_global, "FooBot", url)
    assert is_user_agent_allowed(robotstxt_global, "BarBot", url)
    assert is_user_agent_allowed(robotstxt_only_specific, "QuxBot", url)


# Matching rules against URIs is case sensitive.
def test_id_allow_disallow_value_case_sensitive():
    robotstxt_lowercase_url = "user-agent: FooBot\ndisallow: /x/\n"
    robotstxt_uppercase_url = "user-agent: FooBot\ndisallow: /X/\n"
    url = "http://foo.bar/x/y"
    assert not is_user_agent_allowed(robotstxt_lowercase_url, "FooBot", url)
    assert is_user_agent_allowed(robotstxt_uppercase_url, "FooBot", url)


# The most specific match found MUST be used. The most specific match is the match that
# has the most octets. In case of multiple rules with the same length, the least strict
# rule must be used.
def test_id_longest_match():
    url = "http://foo.bar/x/page.html"
    robotstxt = "user-agent: FooBot\ndisallow: /x/page.html\nallow: /x/\n"
    assert not is_user_agent_allowed(robotstxt, "FooBot", url)

    robotstxt = "user-agent: FooBot\nallow: /x/page.html\ndisallow: /x/\n"
    assert is_user_agent_allowed(robotstxt, "FooBot", url)
    assert not is_user_agent_allowed(robotstxt, "FooBot", "http://foo.bar/x/")

    # In case of equivalent disallow and allow patterns for the same user-agent, allow is used.
    robotstxt = "user-agent: FooBot\ndisallow: \nallow: \n"
    assert is_user_agent_allowed(robotstxt, "FooBot", url)

    # In case of equivalent disallow and allow patterns for the same user-agent, allow is used.
    robotstxt = "user-agent: FooBot\ndisallow: /\nallow: /\n"
    assert is_user_agent_allowed(robotstxt, "FooBot", url)

    url_a = "http://foo.bar/x"
    url_b = "http://foo.bar/x/"
    robotstxt = "user-agent: FooBot\ndisallow: /x\nallow: /x/\n"
    assert not is_user_agent_allowed(robotstxt, "FooBot", url_a)
    assert is_user_agent_allowed(robotstxt, "FooBot", url_b)

    # In case of equivalent disallow and allow patterns for the same user-agent, allow is used.
    robotstxt = "user-agent: FooBot\ndisallow: /x/page.html\nallow: /x/page.html\n"
    assert is_user_agent_allowed(robotstxt, "FooBot", url)

    # Longest match wins.
    robotstxt = "user-agent: FooBot\nallow: /page\ndisallow: /*.html\n"
    assert not is_user_agent_allowed(robotstxt, "FooBot", "http://foo.bar/page.html")
    assert is_user_agent_allowed(robotstxt, "FooBot", "http://foo.bar/page")

    # Longest match wins.
    robotstxt = "user-agent: FooBot\nallow: /x/page.\ndisallow: /*.html\n"
    assert is_user_agent_allowed(robotstxt, "FooBot", url)
    assert not is_user_agent_allowed(robotstxt, "FooBot", "http://foo.bar/x/y.html")

    # Most specific group for FooBot allows implicitly /x/page.
    robotstxt = "User-agent: *\nDisallow: /x/\nUser-agent: FooBot\nDisallow: /y/\n"
    assert is_user_agent_allowed(robotstxt, "FooBot", "http://foo.bar/x/page")
    assert not is_user_agent_allowed(robotstxt, "FooBot", "http://foo.bar/y/page")


# Octets in the URI and robots.txt paths outside the range of the US-ASCII coded character
# set, and those in the reserved range defined by RFC3986, MUST be percent-encoded as
# defined by RFC3986 prior to comparison.
# NOTE: It's up to the caller to percent encode a URL before passing it to the parser.
# Percent encoding URIs in the rules is unnecessary.
def test_id_encoding():
    # /foo/bar?baz=http://foo.bar stays unencoded.
    robotstxt = (
        "User-agent: FooBot\nDisallow: /\nAllow: /foo/bar?qux=taz&baz=http://foo.bar?tar&par\n"
    )
    assert is_user_agent_allowed(
        robotstxt, "FooBot", "http://foo.bar/foo/bar?qux=taz&baz=http://foo.bar?tar&par"
    )

    # 3 byte character: /foo/bar/ツ -> /foo/bar/%E3%83%84
    robotstxt = "User-agent: FooBot\nDisallow: /\nAllow: /foo/bar/ツ\n"
    assert is_user_agent_allowed(robotstxt, "FooBot", "http://foo.bar/foo/bar/%E3%83%84")
    # The parser encodes the 3-byte character, but the URL is not %-encoded.
    assert not is_user_agent_allowed(robotstxt, "FooBot", "http://foo.bar/foo/bar/ツ")

    # Percent encoded 3 byte character: /foo/bar/%E3%83%84 -> /foo/bar/%E3%83%84
    robotstxt = "User-agent: FooBot\nDisallow: /\nAllow: /foo/bar/%E3%83%84\n"
    assert is_user_agent_allowed(robotstxt, "FooBot", "http://foo.bar/foo/bar/%E3%83%84")
    assert not is_user_agent_allowed(robotstxt, "FooBot", "http://foo.bar/foo/bar/ツ")

    # Percent encoded unreserved US-ASCII: /foo/bar/%62%61%7A -> NULL
    # This is illegal according to RFC3986 and while it may work here due to simple string
    # matching, it should not be relied on.
    robotstxt = "User-agent: FooBot\nDisallow: /\nAllow: /foo/bar/%62%61%7A\n"
    assert not is_user_agent_allowed(robotstxt, "FooBot", "http://foo.bar/foo/bar/baz")
    assert is_user_agent_allowed(robotstxt, "FooBot", "http://foo.bar/foo/bar/%62%61%7A")


# The REP I-D defines the following characters that have special meaning in robots.txt:
# # - inline comment.
# $ - end of pattern.
# * - any number of characters.
def test_id_special_characters():
    robotstxt = "User-agent: FooBot\nDisallow: /foo/bar/quz\nAllow: /foo/*/qux\n"
    assert not is_user_agent_allowed(robotstxt, "FooBot", "http://foo.bar/foo/bar/quz")
    assert is_user_agent_allowed(robotstxt, "FooBot", "http://foo.bar/foo/quz")
    assert is_user_agent_allowed(robotstxt, "FooBot", "http://foo.bar/foo//quz")
    assert is_user_agent_allowed(robotstxt, "FooBot", "http://foo.bar/foo/bax/quz")

    robotstxt = "User-agent: FooBot\nDisallow: /foo/bar$\nAllow: /foo/bar/qux\n"
    assert not is_user_agent_allowed(robotstxt, "FooBot", "http://foo.bar/foo/bar")
    assert is_user_agent_allowed(robotstxt, "FooBot", "http://foo.bar/foo/bar/qux")
    assert is_user_agent_allowed(robotstxt, "FooBot", "http://foo.bar/foo/bar/")
    assert is_user_agent_allowed(robotstxt, "FooBot", "http://foo.bar/foo/bar/baz")

    robotstxt = "User-agent: FooBot\n# Disallow: /\nDisallow: /foo/quz#qux\nAllow: /\n"
    assert is_user_agent_allowed(robotstxt, "FooBot", "http://foo.bar/foo/bar")
    assert not is_user_agent_allowed(robotstxt, "FooBot", "http://foo.bar/foo/quz")


# Google-specific: "index.html" (and only that) at the end of a pattern is equivalent to "/".
def test_google_only_index_html_is_directory():
    robotstxt = "User-Agent: *\nAllow: /allowed-slash/index.html\nDisallow: /\n"
    # If index.html is allowed, we interpret this as / being allowed too.
    assert is_user_agent_allowed(robotstxt, "foobot", "http://foo.com/allowed-slash/")
    # Does not exatly match.
    assert not is_user_agent_allowed(robotstxt, "foobot", "http://foo.com/allowed-slash/index.htm")
    # Exact match.
    assert is_user_agent_allowed(robotstxt, "foobot", "http://foo.com/allowed-slash/index.html")
    assert not is_user_agent_allowed(robotstxt, "foobot", "http://foo.com/anyother-url")


# Google-specific: long lines are ignored after 8 * 2083 bytes.
def test_google_only_line_too_long():
    eol_len = len("\n")
    max_line_len = 2083 * 8
    assert max_line_len == MAX_LINE_LEN
    allow = "allow: "
    disallow = "disallow: "

    # Disallow rule pattern matches the URL after being cut off at kMaxLineLen.
    robotstxt = "user-agent: FooBot\n"
    longline = "/x/"
    max_length = max_line_len - len(longline) - len(disallow) + eol_len
    longline += "a" * (max_length - len(longline))
    robotstxt += disallow + longline + "/qux\n"
    # Matches nothing, so URL is allowed.
    assert is_user_agent_allowed(robotstxt, "FooBot", "http://foo.bar/fux")
    # Matches cut off disallow rule.
    assert not is_user_agent_allowed(robotstxt, "FooBot", "http://foo.bar" + longline + "/fux")

    robotstxt = "user-agent: FooBot\ndisallow: /\n"
    longline_a = "/x/"
    longline_b = "/x/"
    max_length = max_line_len - len(longline_a) - len(allow) + eol_len
    longline_a += "a" * (max_length - len(longline_a))
    longline_b += "b" * (max_length - len(longline_b))
    robotstxt += allow + longline_a + "/qux\n"
    robotstxt += allow + longline_b + "/qux\n"
    # URL matches the disallow rule.
    assert not is_user_agent_allowed(robotstxt, "FooBot", "http://foo.bar/")
    # Matches the allow rule exactly.
    assert is_user_agent_allowed(robotstxt, "FooBot", "http://foo.bar" + longline_a + "/qux")
    # Matches cut off allow rule.
    assert is_user_agent_allowed(robotstxt, "FooBot", "http://foo.bar" + longline_b + "/fux")


def test_google_only_documentation_checks():
    # Test documentation from https://developers.google.com/search/reference/robots_txt
    # Section "URL matching based on path values".
    robotstxt = "user-agent: FooBot\ndisallow: /\nallow: /fish\n"
    assert not is_user_agent_allowed(robotstxt, "FooBot", "http://foo.bar/bar")
    assert is_user_agent_allowed(robotstxt, "FooBot", "http://foo.bar/fish")
    assert is_user_agent_allowed(robotstxt, "FooBot", "http://foo.bar/fish.html")
    assert is_user_agent_allowed(robotstxt, "FooBot", "http://foo.bar/fish/salmon.html")
    assert is_user_agent_allowed(robotstxt, "FooBot", "http://foo.bar/fishheads")
    assert is_user_agent_allowed(robotstxt, "FooBot", "http://foo.bar/fishheads/yummy.html")
    assert is_user_agent_allowed(robotstxt, "FooBot", "http://foo.bar/fish.html?id=anything")
    assert not is_user_agent_allowed(robotstxt, "FooBot", "http://foo.bar/Fish.asp")
    assert not is_user_agent_allowed(robotstxt, "FooBot", "http://foo.bar/catfish")
    assert not is_user_agent_allowed(robotstxt, "FooBot", "http://foo.bar/?id=fish")

    # "/fish*" equals "/fish"
    robotstxt = "user-agent: FooBot\ndisallow: /\nallow: /fish*\n"
    assert not is_user_agent_allowed(robotstxt, "FooBot", "http://foo.bar/bar")
    assert is_user_agent_allowed(robotstxt, "FooBot", "http://foo.bar/fish")
    assert is_user_agent_allowed(robotstxt, "FooBot", "http://foo.bar/fish.html")
    assert is_user_agent_allowed(robotstxt, "FooBot", "http://foo.bar/fish/salmon.html")
    assert is_user_agent_allowed(robotstxt, "FooBot", "http://foo.bar/fishheads")
    assert is_user_agent_allowed(robotstxt, "FooBot", "http://foo.bar/fishheads/yummy.html")
    assert is_user_agent_allowed(robotstxt, "FooBot", "http://foo.bar/fish.html?id=anything")
    assert not is_user_agent_allowed(robotstxt, "FooBot", "http://foo.bar/Fish.bar")
    assert not is_user_agent_allowed(robotstxt, "FooBot", "http://foo.bar/catfish")
    assert not is_user_agent_allowed(robotstxt, "FooBot", "http://foo.bar/?id=fish")

    # "/fish/" does not equal "/fish"
    robotstxt = "user-agent: FooBot\ndisallow: /\nallow: /fish/\n"
    assert not is_user_agent_allowed(robotstxt, "FooBot", "http://foo.bar/bar")
    assert is_user_agent_allowed(robotstxt, "FooBot", "http://foo.bar/fish/")
    assert is_user_agent_allowed(robotstxt, "FooBot", "http://foo.bar/fish/salmon")
    assert is_user_agent_allowed(robotstxt, "FooBot", "http://foo.bar/fish/?salmon")
    assert is_user_agent_allowed(robotstxt, "FooBot", "http://foo.bar/fish/salmon.html")
    assert is_user_agent_allowed(robotstxt, "FooBot", "http://foo.bar/fish/?id=anything")
    assert not is_user_agent_allowed(robotstxt, "FooBot", "http://foo.bar/fish")
    assert not is_user_agent_allowed(robotstxt, "FooBot", "http://foo.bar/fish.html")
    assert not is_user_agent_allowed(robotstxt, "FooBot", "http://foo.bar/Fish/Salmon.html")

    # "/*.php"
    robotstxt = "user-agent: FooBot\ndisallow: /\nallow: /*.php\n"
    assert not is_user_agent_allowed(robotstxt, "FooBot", "http://foo.bar/bar")
    assert is_user_agent_allowed(robotstxt, "FooBot", "http://foo.bar/filename.php")
    assert is_user_agent_allowed(robotstxt, "FooBot", "http://foo.bar/folder/filename.php")
    assert is_user_agent_allowed(
        robotstxt, "FooBot", "http://foo.bar/folder/filename.php?parameters"
    )
    assert is_user_agent_allowed(robotstxt, "FooBot", "http://foo.bar//folder/any.php.file.html")
    assert is_user_agent_allowed(robotstxt, "FooBot", "http://foo.bar/filename.php/")
    assert is_user_agent_allowed(robotstxt, "FooBot", "http://foo.bar/index?f=filename.php/")
    assert not is_user_agent_allowed(robotstxt, "FooBot", "http://foo.bar/php/")
    assert not is_user_agent_allowed(robotstxt, "FooBot", "http://foo.bar/index?php")
    assert not is_user_agent_allowed(robotstxt, "FooBot", "http://foo.bar/windows.PHP")

    # "/*.php$"
    robotstxt = "user-agent: FooBot\ndisallow: /\nallow: /*.php$\n"
    assert not is_user_agent_allowed(robotstxt, "FooBot", "http://foo.bar/bar")
    assert is_user_agent_allowed(robotstxt, "FooBot", "http://foo.bar/filename.php")
    assert is_user_agent_allowed(robotstxt, "FooBot", "http://foo.bar/folder/filename.php")
    assert not is_user_agent_allowed(robotstxt, "FooBot", "http://foo.bar/filename.php?parameters")
    assert not is_user_agent_allowed(robotstxt, "FooBot", "http://foo.bar/filename.php/")
    assert not is_user_agent_allowed(robotstxt, "FooBot", "http://foo.bar/filename.php5")
    assert not is_user_agent_allowed(robotstxt, "FooBot", "http://foo.bar/php/")
    assert not is_user_agent_allowed(robotstxt, "FooBot", "http://foo.bar/filename?php")
    assert not is_user_agent_allowed(robotstxt, "FooBot", "http://foo.bar/aaaphpaaa")
    assert not is_user_agent_allowed(robotstxt, "FooBot", "http://foo.bar//windows.PHP")

    # "/fish*.php"
    robotstxt = "user-agent: FooBot\ndisallow: /\nallow: /fish*.php\n"
    assert not is_user_agent_allowed(robotstxt, "FooBot", "http://foo.bar/bar")
    assert is_user_agent_allowed(robotstxt, "FooBot", "http://foo.bar/fish.php")
    assert is_user_agent_allowed(
        robotstxt, "FooBot", "http://foo.bar/fishheads/catfish.php?parameters"
    )
    assert not is_user_agent_allowed(robotstxt, "FooBot", "http://foo.bar/Fish.PHP")

    # Section "Order of precedence for group-member records".
    robotstxt = "user-agent: FooBot\nallow: /p\ndisallow: /\n"
    assert is_user_agent_allowed(robotstxt, "FooBot", "http://example.com/page")

    robotstxt = "user-agent: FooBot\nallow: /folder\ndisallow: /folder\n"
    assert is_user_agent_allowed(robotstxt, "FooBot", "http://example.com/folder/page")

    robotstxt = "user-agent: FooBot\nallow: /page\ndisallow: /*.htm\n"
    assert not is_user_agent_allowed(robotstxt, "FooBot", "http://example.com/page.htm")

    robotstxt = "user-agent: FooBot\nallow: /$\ndisallow: /\n"
    assert is_user_agent_allowed(robotstxt, "FooBot", "http://example.com/")
    assert not is_user_agent_allowed(robotstxt, "FooBot", "http://example.com/page.html")


class RobotsStatsReporter:
    """robots_test.cc RobotsStatsReporter over filbert.fetch.robots.parse_directives."""

    def __init__(self) -> None:
        self.last_line_seen = 0
        self.valid_directives = 0
        self.unknown_directives = 0
        self.sitemap = ""

    def parse(self, body: str | bytes) -> None:
        self.__init__()  # HandleRobotsStart
        for directive in parse_directives(body):
            if directive.kind in (USER_AGENT, ALLOW, DISALLOW, SITEMAP):
                assert directive.line >= self.last_line_seen
                self.last_line_seen = directive.line
                self.valid_directives += 1
                if directive.kind == SITEMAP:
                    self.sitemap += directive.value
            else:  # HandleUnknownAction (Crawl-delay is unknown to Google's parser)
                self.last_line_seen = directive.line
                self.unknown_directives += 1


# Different kinds of line endings are all supported: %x0D / %x0A / %x0D.0A
def test_id_lines_numbers_are_counted_correctly():
    report = RobotsStatsReporter()
    unix_file = "User-Agent: foo\nAllow: /some/path\nUser-Agent: bar\n\n\nDisallow: /\n"
    report.parse(unix_file)
    assert report.valid_directives == 4
    assert report.last_line_seen == 6

    dos_file = "User-Agent: foo\r\nAllow: /some/path\r\nUser-Agent: bar\r\n\r\n\r\nDisallow: /\r\n"
    report.parse(dos_file)
    assert report.valid_directives == 4
    assert report.last_line_seen == 6

    mac_file = "User-Agent: foo\rAllow: /some/path\rUser-Agent: bar\r\r\rDisallow: /\r"
    report.parse(mac_file)
    assert report.valid_directives == 4
    assert report.last_line_seen == 6

    no_final_newline = "User-Agent: foo\nAllow: /some/path\nUser-Agent: bar\n\n\nDisallow: /"
    report.parse(no_final_newline)
    assert report.valid_directives == 4
    assert report.last_line_seen == 6

    mixed_file = "User-Agent: foo\nAllow: /some/path\r\nUser-Agent: bar\n\r\n\nDisallow: /"
    report.parse(mixed_file)
    assert report.valid_directives == 4
    assert report.last_line_seen == 6


# BOM characters are unparseable and thus skipped. The rules following the line are used.
def test_id_utf8_byte_order_mark_is_skipped():
    report = RobotsStatsReporter()
    utf8_file_full_bom = b"\xef\xbb\xbfUser-Agent: foo\nAllow: /AnyValue\n"
    report.parse(utf8_file_full_bom)
    assert report.valid_directives == 2
    assert report.unknown_directives == 0

    # We allow as well partial ByteOrderMarks.
    utf8_file_partial2_bom = b"\xef\xbbUser-Agent: foo\nAllow: /AnyValue\n"
    report.parse(utf8_file_partial2_bom)
    assert report.valid_directives == 2
    assert report.unknown_directives == 0

    utf8_file_partial1_bom = b"\xefUser-Agent: foo\nAllow: /AnyValue\n"
    report.parse(utf8_file_partial1_bom)
    assert report.valid_directives == 2
    assert report.unknown_directives == 0

    # If the BOM is not the right sequence, the first line looks like garbage that is
    # skipped (we essentially see "\x11\xBFUser-Agent").
    utf8_file_broken_bom = b"\xef\x11\xbfUser-Agent: foo\nAllow: /AnyValue\n"
    report.parse(utf8_file_broken_bom)
    assert report.valid_directives == 1
    assert report.unknown_directives == 1  # We get one broken line.

    # Some other messed up file: BOMs only valid in the beginning of the file.
    utf8_bom_somewhere_in_middle_of_file = b"User-Agent: foo\n\xef\xbb\xbfAllow: /AnyValue\n"
    report.parse(utf8_bom_somewhere_in_middle_of_file)
    assert report.valid_directives == 1
    assert report.unknown_directives == 1


# Google specific: the I-D allows any line that crawlers might need, such as sitemaps,
# which Google supports.
def test_id_non_standard_line_example_sitemap():
    report = RobotsStatsReporter()
    sitemap_loc = "http://foo.bar/sitemap.xml"
    robotstxt = "User-Agent: foo\nAllow: /some/path\nUser-Agent: bar\n\n\n"
    robotstxt += "Sitemap: " + sitemap_loc + "\n"
    report.parse(robotstxt)
    assert report.sitemap == sitemap_loc

    # A sitemap line may appear anywhere in the file.
    robotstxt_temp = "User-Agent: foo\nAllow: /some/path\nUser-Agent: bar\n\n\n"
    robotstxt = "Sitemap: " + sitemap_loc + "\n" + robotstxt_temp
    report.parse(robotstxt)
    assert report.sitemap == sitemap_loc


@pytest.mark.parametrize(
    "url, expected_path",
    [
        # Only testing URLs that are already correctly escaped here.
        ("", "/"),
        ("http://www.example.com", "/"),
        ("http://www.example.com/", "/"),
        ("http://www.example.com/a", "/a"),
        ("http://www.example.com/a/", "/a/"),
        ("http://www.example.com/a/b?c=http://d.e/", "/a/b?c=http://d.e/"),
        ("http://www.example.com/a/b?c=d&e=f#fragment", "/a/b?c=d&e=f"),
        ("example.com", "/"),
        ("example.com/", "/"),
        ("example.com/a", "/a"),
        ("example.com/a/", "/a/"),
        ("example.com/a/b?c=d&e=f#fragment", "/a/b?c=d&e=f"),
        ("a", "/"),
        ("a/", "/"),
        ("/a", "/a"),
        ("a/b", "/b"),
        ("example.com?a", "/?a"),
        ("example.com/a;b#c", "/a;b"),
        ("//a/b/c", "/b/c"),
    ],
)
def test_get_path_params_query(url, expected_path):
    assert get_path_params_query(url) == expected_path


@pytest.mark.parametrize(
    "pattern, expected",
    [
        ("http://www.example.com", "http://www.example.com"),
        ("/a/b/c", "/a/b/c"),
        ("á", "%C3%A1"),
        ("%aa", "%AA"),
    ],
)
def test_maybe_escape_pattern(pattern, expected):
    assert maybe_escape_pattern(pattern) == expected


# ---------------------------------------------------------------------------------
# filbert's own tests
# ---------------------------------------------------------------------------------

AGENT = "filbert"
FILE = b"User-agent: *\nDisallow: /private/\n"


@pytest.mark.parametrize(
    "status, allowed, cached, unavailable",
    [
        (200, False, True, False),  # the file's rules: /private/ is denied
        (204, False, True, False),
        (404, True, True, False),  # 4xx: no robots.txt, no restrictions
        (401, True, True, False),
        (403, True, True, False),
        (410, True, True, False),
        (429, False, False, True),  # too many requests: unavailable, deny all for now
        (500, False, False, True),  # server error: deny all for now
        (503, False, False, True),
        (None, False, False, True),  # unreachable
    ],
)
def test_status_semantics(status, allowed, cached, unavailable):
    body = FILE if status is not None and status < 300 else b""
    if status == 204:
        body = FILE  # a 2xx answer is parsed whatever its code
    rules = rules_from_response(status, body, "connection refused")
    assert rules.allowed("http://example.com/private/x", AGENT) is allowed
    assert rules.unavailable is unavailable
    # the fetcher's test for "retry later": denied and no parsed file
    assert (rules.parser is None and not rules.allow_all) is unavailable
    cache = RobotsCache(60)
    cache.put("http://example.com", rules)
    assert (cache.get("http://example.com") is rules) is cached
    if unavailable:
        assert rules.reason
        assert not rules.allowed("http://example.com/", AGENT)
        assert rules.crawl_delay(AGENT) is None and rules.sitemaps == []
    else:
        assert rules.allowed("http://example.com/public", AGENT)


def test_unreachable_reason_names_the_error():
    assert "connection refused" in rules_from_response(None, b"", "connection refused").reason
    assert "429" in rules_from_response(429, b"").reason


def test_empty_200_allows_everything():
    rules = rules_from_response(200, b"")
    assert rules.parser is not None and not rules.unavailable
    assert rules.allowed("http://example.com/anything", AGENT)


def test_crawl_delay_per_group():
    body = (
        b"User-agent: *\n"
        b"Crawl-delay: 10\n"
        b"Disallow: /x\n"
        b"\n"
        b"User-agent: FILBERT\n"
        b"User-agent: other\n"
        b"Crawl-delay: 2.5\n"
        b"\n"
        b"User-agent: slowbot\n"
        b"Crawl-delay: soon\n"  # garbage is ignored
        b"Crawl-delay: 7\n"
        b"\n"
        b"User-agent: nodelay\n"
        b"Disallow: /y\n"
        b"\n"
        b"User-agent: weird\n"
        b"Crawl-delay: -3\n"
        b"Crawl-delay: nan\n"
    )
    rules = rules_from_response(200, body)
    assert rules.crawl_delay("filbert") == 2.5
    assert rules.crawl_delay("Other") == 2.5
    assert rules.crawl_delay("somebot") == 10.0  # the "*" group
    assert rules.crawl_delay("slowbot") == 7.0
    assert rules.crawl_delay("nodelay") is None  # its own group wins, and has none
    assert rules.crawl_delay("weird") is None
    assert rules_from_response(200, b"Crawl-delay: 5\n").crawl_delay(AGENT) is None  # no group


def test_crawl_delay_line_ends_the_agent_list_like_other_lines():
    # Google's parser treats any non user-agent line as the end of a group's agent lines
    body = b"User-agent: a\nCrawl-delay: 3\nUser-agent: b\nDisallow: /\n"
    rules = rules_from_response(200, body)
    assert rules.crawl_delay("a") == 3.0 and rules.allowed("http://h/x", "a")
    assert rules.crawl_delay("b") is None and not rules.allowed("http://h/x", "b")


def test_sitemaps_anywhere_absolute_only():
    body = (
        b"Sitemap: https://example.com/sitemap.xml\n"
        b"User-agent: *\n"
        b"Disallow: /x\n"
        b"sitemap:http://example.com/news.xml # a comment\n"
        b"Site-map: https://example.com/other.xml\n"
        b"Sitemap: /relative.xml\n"
        b"Sitemap: ftp://example.com/s.xml\n"
        b"Sitemap: https://example.com/sitemap.xml\n"
        b"User-agent: b\n"
        b"Sitemap: https://example.com/last.xml\n"
    )
    rules = rules_from_response(200, body)
    assert rules.sitemaps == [
        "https://example.com/sitemap.xml",
        "http://example.com/news.xml",
        "https://example.com/other.xml",
        "https://example.com/last.xml",
    ]
    assert not rules.allowed("http://example.com/x", AGENT)  # sitemap lines don't break groups
    assert rules_from_response(404, b"").sitemaps == []


def test_bom_then_rules():
    for bom in (b"\xef\xbb\xbf", b"\xef\xbb", b"\xef"):
        rules = rules_from_response(200, bom + b"User-agent: filbert\nDisallow: /a\n")
        assert not rules.allowed("http://h/a", AGENT)
        assert rules.allowed("http://h/b", AGENT)


def test_typos_and_missing_colon():
    for line in (b"Disalow: /a", b"dissallow: /a", b"DISALLAW /a", b"diasllow:/a"):
        rules = rules_from_response(200, b"useragent: filbert\n" + line + b"\n")
        assert not rules.allowed("http://h/a/b", AGENT), line
    rules = rules_from_response(200, b"User agent: filbert\nDisallow: /a\n")
    assert not rules.allowed("http://h/a/b", AGENT)
    # a missing colon is only accepted between exactly two words
    rules = rules_from_response(200, b"User-agent: filbert\nDisallow /a /b\n")
    assert rules.allowed("http://h/a/b", AGENT)


def test_global_agent_with_trailing_words_and_product_tokens():
    rules = rules_from_response(200, b"User-agent: * everyone\nDisallow: /\n")
    assert not rules.allowed("http://h/", AGENT)
    rules = rules_from_response(200, b"User-agent: filbert/2.0 (+http://x)\nDisallow: /\n")
    assert not rules.allowed("http://h/", AGENT)
    # "*bot" is not the global agent
    rules = rules_from_response(200, b"User-agent: *bot\nDisallow: /\n")
    assert rules.allowed("http://h/", AGENT)


def test_wildcards_and_anchors():
    body = (
        b"User-agent: *\n"
        b"Disallow: /*/tmp/*.bak$\n"
        b"Disallow: /a$b\n"  # "$" not at the end is literal
        b"Disallow: /**q**\n"
        b"Allow: /*$\n"
    )
    rules = rules_from_response(200, body)
    assert not rules.allowed("http://h/x/tmp/y.bak", AGENT)
    assert rules.allowed("http://h/x/tmp/y.bak2", AGENT)
    assert not rules.allowed("http://h/a$b", AGENT)
    assert rules.allowed("http://h/ab", AGENT)
    assert not rules.allowed("http://h/zzqzz", AGENT)  # "/**q**" (7) beats "/*$" (3)
    assert rules.allowed("http://h/zzz", AGENT)


def test_pathological_wildcards_are_fast():
    pattern = "/" + "*a" * 30 + "*b"
    rules = rules_from_response(200, f"User-agent: *\nDisallow: {pattern}\n".encode())
    url = "http://h/" + "a" * 5000
    start = time.perf_counter()
    assert rules.allowed(url, AGENT)
    assert time.perf_counter() - start < 0.5


def test_many_rules_bucketed_like_linear():
    # long rule lists are indexed by prefix; the answers must equal a plain scan
    rng = random.Random(7)
    words = ["a", "ab", "abc", "abcd", "abcde", "b", "bc", "x", "*", "$"]
    lines = [b"User-agent: *"]
    for _ in range(200):
        pattern = "/" + "".join(rng.choice(words) for _ in range(rng.randint(0, 4)))
        lines.append(f"{rng.choice(['Allow', 'Disallow'])}: {pattern}".encode())
    body = b"\n".join(lines)
    rules = rules_from_response(200, body)
    patterns = [(d.kind == ALLOW, d.value) for d in parse_directives(body) if d.kind != USER_AGENT]
    for _ in range(500):
        path = "/" + "".join(rng.choice("abcdx/$") for _ in range(rng.randint(0, 8)))
        assert rules.allowed("http://h" + path, AGENT) == _reference_allowed(patterns, path), path


def _reference_allowed(patterns: list[tuple[bool, str]], path: str) -> bool:
    """robots.cc Matches (the position-set algorithm) and longest match, Allow on ties."""
    best_allow, best_disallow = -1, -1
    for allow, pattern in patterns:
        positions = [0]
        matched = True
        for i, char in enumerate(pattern):
            if char == "$" and i == len(pattern) - 1:
                matched = positions[-1] == len(path)
                break
            if char == "*":
                positions = list(range(positions[0], len(path) + 1))
            else:
                positions = [p + 1 for p in positions if p < len(path) and path[p] == char]
                if not positions:
                    matched = False
                    break
        if not matched:
            continue
        if allow:
            best_allow = max(best_allow, len(pattern))
        else:
            best_disallow = max(best_disallow, len(pattern))
    if best_allow > 0 or best_disallow > 0:
        return not best_disallow > best_allow
    return True


def test_large_file():
    lines = [b"User-agent: otherbot", b"Disallow: /"]
    for i in range(12000):
        lines.append(b"User-agent: bot%d" % i if i % 100 == 0 else b"Disallow: /dir%d/" % i)
    lines += [
        b"User-agent: filbert",
        b"Disallow: /secret",
        b"Crawl-delay: 4",
        b"Sitemap: https://h/s.xml",
    ]
    body = b"\n".join(lines) + b"\n"
    assert len(body) > 150_000
    body = body + b"# " + b"x" * (600_000 - len(body)) + b"\n"
    assert len(body) > 600_000
    start = time.perf_counter()
    rules = rules_from_response(200, body)
    assert not rules.allowed("http://h/secret/x", AGENT)
    assert rules.allowed("http://h/dir5/", AGENT)
    assert rules.crawl_delay(AGENT) == 4.0
    assert rules.sitemaps == ["https://h/s.xml"]
    assert not rules.allowed("http://h/dir5/", "otherbot")
    assert time.perf_counter() - start < 5


def test_truncated_body_parses_what_it_got():
    body = b"User-agent: *\nDisallow: /a\nDisallow: /bcd"
    rules = rules_from_response(200, body[:-2])  # cut mid-line by the content limit
    assert not rules.allowed("http://h/a", AGENT)
    assert not rules.allowed("http://h/bzz", AGENT)


def test_garbage_bytes_never_raise():
    rng = random.Random(1)
    alphabet = b"\x00\x80\xff\xef\xbb\xbf\r\n\t :#*$%/aAuU-"
    for _ in range(300):
        body = bytes(rng.choice(alphabet) for _ in range(rng.randint(0, 200)))
        rules = rules_from_response(200, body)
        assert isinstance(rules.allowed("http://h/a%FFb", AGENT), bool)
        delay = rules.crawl_delay(AGENT)
        assert delay is None or math.isfinite(delay)
        assert isinstance(rules.sitemaps, list)
    body = bytes(rng.randrange(256) for _ in range(100_000))
    rules = rules_from_response(200, body)
    assert isinstance(rules.allowed("http://h/", AGENT), bool)


def test_invalid_utf8_and_nul_bytes():
    body = (
        b"User-agent: filbert\xff\n"  # token "filbert", garbage after it
        b"Disallow: /caf\xe9\n"  # latin-1 byte, escaped as %E9
        b"Disallow: /nul\x00/ignored\n"  # C strings: the line ends at NUL
        b"Sitemap: https://h/\xffmap.xml\n"
    )
    rules = rules_from_response(200, body)
    assert not rules.allowed("http://h/caf%E9", AGENT)
    assert rules.allowed("http://h/caf%C3%A9", AGENT)
    assert not rules.allowed("http://h/nul/other", AGENT)
    assert rules.sitemaps == ["https://h/\ufffdmap.xml"]


def test_agent_selection_is_cached_per_rules():
    rules = rules_from_response(200, b"User-agent: filbert\nDisallow: /a\n")
    assert isinstance(rules, RobotRules) and isinstance(rules.parser, RobotsTxt)
    assert not rules.allowed("http://h/a", AGENT)
    assert AGENT in rules.parser._selected
    assert rules.allowed("http://h/a", "otherbot")
    assert not rules.allowed("http://h/a", "FILBERT")


def test_path_fast_path_equals_the_general_one():
    from filbert.fetch.robots import _path_params_query

    rng = random.Random(0)
    parts = ["http://", "https://", "//", "/", "?", ";", "#", "a", "b.c", ":", "://"]
    for _ in range(20_000):
        url = "".join(rng.choice(parts) for _ in range(rng.randint(0, 7)))
        assert get_path_params_query(url) == _path_params_query(url), url
