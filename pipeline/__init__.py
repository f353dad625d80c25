"""The fusion chain and the frame-batching scheduler that runs it.

A leaf package: it imports neither aiohttp nor aiortc, and runs without CUDA.
"""
