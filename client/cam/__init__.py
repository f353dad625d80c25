"""`facefuse cam`: a camera (or a looped video file) published over WHIP, the swapped video played
back over WHEP and written to a virtual camera (pyvirtualcam) and/or a file.

- `cli`: the command's flags, read into `CamOptions`;
- `run`: the async main that ties the parts together and ends cleanly on Ctrl-C;
- `whip_http`: the POST of an offer that follows 307/308 itself, and the DELETE of the resource;
- `errors`: the failures shown as one line, and the server's refusals said for a user;
- `peers`: the publishing and the playing peer connections;
- `camera_input`: the camera or the file as a track, paced in real time;
- `virtual_camera`, `file_output`: where the swapped frames go; `output_pump` feeds them;
- `status_line`: the one-line live status.
"""
