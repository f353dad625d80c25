"""Token metering of processed video (leases, throttling) on Redis or in memory.

Not built yet: the token-meter issue fills this package. A leaf: imports neither
aiohttp, aiortc nor pipeline.
"""
