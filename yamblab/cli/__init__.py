"""The ``yamblab`` command line: the app and its entry point (:mod:`.main`), and one module per
command group (oracle, grade, play, serve, train, sweep, model, valuation)."""
