"""How passes are found, optioned, run and watched: the registry, pass options, the worklist driver, dirty tracking, instrumentation, crash reports."""
