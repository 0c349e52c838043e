"""The simulated node: a kubelet (registration, device manager, pod-resources) on real sockets."""
