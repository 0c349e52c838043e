"""The kubelet's admission decision, predicted: pure functions over model values (devctl fit, devctl why)."""
