"""One module per `statekeeper` subcommand (NAME, HELP, configure(parser), run(args) -> int)."""
