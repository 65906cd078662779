"""How long one engine iteration takes and how much KV cache a replica has.

Never imports the engine: the scheduler hands in a frozen `BatchShape` and gets a time back.
"""
