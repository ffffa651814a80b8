"""Live deltas without a setting (docs/live-deltas.md): where a worker of
this process hands its live pieces (an in-process sink, when the gateway
runs here), and how it finds a gateway of this machine to post them to."""
