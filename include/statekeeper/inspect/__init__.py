"""The read side: answers about one `_metadata` and about the index, without Spark, for a person or a script.

    statekeeper.inspect.metadata   `statekeeper inspect`: what is inside one `_metadata` and why it is big
    statekeeper.inspect.explain    `statekeeper explain <uri>`: who references this, and what does it need
    statekeeper.inspect.idle       `statekeeper explain --inactive-after`: the idle job directories

Each reads what it needs (the `_metadata` through the codec; the warehouse's tables through delta-rs at the index
cut, one data file at a time) and returns plain data with a stable JSON form; the `statekeeper` commands
(statekeeper.commands) print it. The Spark jobs never import this package.
"""
