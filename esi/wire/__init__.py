"""What crosses the network between esi and external schedulers, with no I/O of its own.

``rest`` holds the JSON bodies of the REST API under ``/external`` (the original ESI's shapes,
docs/compatibility.md#json-shapes) and its one error shape; ``stomp_frames`` the STOMP 1.2 frames of the
notification channel.
"""
