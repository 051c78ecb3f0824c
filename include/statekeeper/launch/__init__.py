"""Everything that starts a job: the JVM parts it runs with."""
