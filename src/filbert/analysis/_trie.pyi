def matches(
    chars: object,
    wide: bool,
    label: object,
    first_child: object,
    query: object,
    errors: int,
    whole: bool,
) -> tuple[bytes, bytes, bytes, bytes]: ...
def nodes(lcp: object, lengths: object) -> tuple[bytes, bytes, bytes, bytes]: ...
