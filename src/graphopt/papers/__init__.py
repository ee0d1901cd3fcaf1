"""The papers' suites that run learned systems: `graphopt bench gdp-*`, `go-*`, `gflownet-*`.

One module per paper suite (`gdp`, `gdp_fig5`, `go`, `gflownet`). They sit above `evaluation`,
whose harness, reports and generic suites they use, so that `evaluation` imports no learned
system; the command line's table of suites (`graphopt.cli.bench.SUITES`) names their run
functions.
"""
