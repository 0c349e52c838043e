"""The lab: the simulated node, the in-process device plugin and DRA driver, and what only they use."""
