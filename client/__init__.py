"""The Python side of a facefuse caller: what scripts, tests, benchmarks and `facefuse cam` share.

No server code imports it. It uses the server's own peer tuning (`stream`) so that a client
peer receives and sends as the server's does.

- `facefuse_client`: upload a face, stream a track, receive the processed video and the events;
- `image_track`: a still photo as live video, a stand-in camera;
- `still_picture`: a photo fitted into a video frame, or framed as a webcam frames a face;
- `frame_stamp`: a number in a frame's pixels, read back after the codec round trip.
"""
