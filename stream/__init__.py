"""WebRTC sessions: remote track -> the runner's latest-frame slot -> processed track back.

Uses `pipeline` through its public API; imports nothing from `signaling`.
"""
