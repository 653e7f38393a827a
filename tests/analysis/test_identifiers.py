"""Identifiers as written on pages and typed in queries (analysis/identifiers.py)."""

from filbert.analysis.identifiers import is_identifier, name_keys, query_keys, snake_case


def test_a_defined_name_is_found_by_every_tail_of_its_path() -> None:
    assert name_keys("std::vec::Vec::with_capacity") == [
        "std.vec.vec.withcapacity",
        "vec.vec.withcapacity",
        "vec.withcapacity",
        "withcapacity",
    ]
    assert name_keys("os.path.join") == ["os.path.join", "path.join", "join"]
    assert name_keys("SELECT INTO") == ["selectinto"]
    assert name_keys("pg_dump") == ["pgdump"]
    assert name_keys("Vec<T>::new()") == ["vec.new", "new"]  # no type parameters, no ()
    assert name_keys("") == [] and name_keys("::") == []


def test_a_name_typed_any_way_gives_the_keys_of_its_definition() -> None:
    for typed in [
        "Vec::with_capacity",
        "vec with_capacity",
        "Vec with capacity",
        "vec.with_capacity",
    ]:
        assert "vec.withcapacity" in query_keys(typed.split()) or "vecwithcapacity" in query_keys(
            typed.split()
        ), typed
    assert "readtostring" in query_keys(["read", "to", "string"])
    assert "readtostring" in query_keys(["READ_TO_STRING"])
    assert "os.path.join" in query_keys(["os", "path", "join"])
    assert "hashmap" in query_keys(["hash", "map"])
    assert query_keys(["TypeId"]) == ["typeid"]  # a one-word query is a name on its own


def test_a_common_word_among_others_is_no_name_of_its_own() -> None:
    keys = query_keys(["how", "to", "use", "read_to_string"])
    assert "use" not in keys and "how" not in keys  # rustdoc has a page for `use`
    assert "readtostring" in keys  # an identifier as written is one


def test_a_long_query_gives_a_bounded_number_of_keys() -> None:
    assert len(query_keys([f"word{n}" for n in range(200)])) <= 32


def test_snake_case_is_run_together_as_camel_case_is_indexed() -> None:
    assert snake_case("call read_to_string or as_ref, not _private") == [
        (5, 19, "readtostring"),
        (23, 29, "asref"),
    ]
    assert is_identifier("HashMap") and is_identifier("os.path") and is_identifier("pg_dump")
    assert not is_identifier("Debian") and not is_identifier("end.")
