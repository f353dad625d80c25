"""Helpers the tests share, one module a concern: `server` (an in-process server and its
settings), `photos` and `sdist_photos` (real face photographs), `browser` (headless Chromium and
server processes), `metering` (accounts and frame-rate checks of metered sessions), `redis_server`,
`ports`, `standin_models`, `image_bombs`, `face_zone`, `phone_photos`. Empty on purpose: a test of
the pipeline alone imports `support.photos` without the server (aiortc, aiohttp)."""
