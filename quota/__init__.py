"""Token metering of processed video: accounts, leases, throttling; on Redis or in memory.

A leaf package: imports neither aiohttp, aiortc nor pipeline. Amounts are integer
micro-tokens (1 token = 1_000_000) so that per-frame prices (1/30 token) add up
exactly in Lua and in Python alike.
"""
