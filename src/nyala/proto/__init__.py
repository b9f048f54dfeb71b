"""Generated protobuf modules (``make proto`` regenerates them from ``proto/nyala/``).

Only plain data lives here: every RPC body is one of these messages.  Do not edit the
``*_pb2.py`` files by hand.
"""
