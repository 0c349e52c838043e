"""The in-process device plugin: a real DevicePlugin server for debugging the kubelet side."""
