"""The kubelet's admission decision, predicted: pure functions over model values (devctl fit, devctl why).

``admit.admit(pod, inputs)`` runs the topology manager's flow (``hints``: the merge; ``devices``, ``cpus``,
``memory``: the providers; ``providers``: the CPU manager as a provider); ``fits.fits_with`` proposes changes.
"""
