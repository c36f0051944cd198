def test_evennia_initialised():
    import evennia

    assert evennia.TICKER_HANDLER is not None
    assert evennia.create_object is not None
