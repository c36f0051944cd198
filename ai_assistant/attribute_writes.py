"""
Writing a state document to its Evennia Attribute at a flush (`adapters.AttributeState.flush`).
"""


def write_attribute(owner, name, value):
    """
    Write `value` to the Attribute `name` of `owner`, saving it once.

    Evennia's `attributes.add` saves an existing Attribute twice (its `value` setter saves,
    then the update saves its string column again), and each save deep-copies and pickles the
    value: for a grown journal, one of those copies and pickles is a third of a flush
    (`bench.reactor`). The Attribute's own `value` setter, which `add` calls, saves once; a
    new Attribute, or one holding a plain string, goes through `add`.
    """
    found = owner.attributes.backend.get(name, None)
    if found and found[0].db_strvalue is None:
        found[0].value = value
    else:
        owner.attributes.add(name, value)


def forget_cached_attribute(owner, name):
    """
    Drop the Attribute `name` from Evennia's cache of `owner`'s Attributes.

    Evennia's handler keeps every Attribute it wrote, and with it the value as written (its
    `to_pickle` copy): for a heavy document, a second copy held for the life of the process,
    whether or not the assistant is resident. A later read through Evennia queries it again.
    """
    owner.attributes.backend._delete_cache(name, None)
