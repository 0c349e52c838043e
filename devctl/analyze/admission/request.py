"""A pod's resources as the kubelet's admission reads them: from a Pod manifest, or from ``NAME=QUANTITY`` words.

Pure functions over values (a manifest is a mapping someone already read: ``devctl.node.podmanifest``).

- Quantities follow apimachinery's grammar (``resource/quantity.go``): a signed decimal number, then a binary
  suffix (``Ki`` … ``Ei``), a decimal one (``m``, ``k``, ``M``, ``G``, ``T``, ``P``, ``E``) or an exponent
  (``e3``, ``E-2``). Values are exact fractions until the end: CPU becomes millicores rounded up
  (``Quantity.MilliValue``), everything else a whole number rounded up (``Quantity.Value``); an extended
  resource (``nvidia.com/gpu``) must be a whole number, as the API server validates.
- API defaulting (``SetDefaults_Pod``): a resource given only as a limit is requested at that limit.
- The QoS class is the kubelet's ``GetPodQOS`` as of v1.32 (``pkg/apis/core/v1/helper/qos``): CPU and memory
  only, zero ignored, requests and limits summed over init and app containers; Guaranteed when every container
  has CPU and memory limits and the sums of requests equal the sums of limits; BestEffort when nothing is
  asked; else Burstable. With pod-level resources (``spec.resources``, the ``PodLevelResources`` gate: alpha
  in 1.32, beta from 1.34) the class is decided by them alone, as ``ComputePodQOS`` does when the gate is on;
  the pod-level amounts themselves are not in ``PodRequest`` (its fields are per container).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from fractions import Fraction

from devctl.base.errors import DevctlError, ErrorKind
from devctl.model.machine import ContainerRequest, PodRequest

GUARANTEED = "Guaranteed"
BURSTABLE = "Burstable"
BEST_EFFORT = "BestEffort"

_QOS_RESOURCES = ("cpu", "memory")
_BINARY = {"Ki": 1, "Mi": 2, "Gi": 3, "Ti": 4, "Pi": 5, "Ei": 6}
_DECIMAL = {"": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
_NUMBER = re.compile(r"([+-]?)(\d+(?:\.\d*)?|\.\d+)")
_EXPONENT = re.compile(r"[eE]([+-]?\d+)")
# Far beyond any machine (an exabyte is 1e18), and small enough that an exact fraction stays cheap.
_MAX_EXPONENT = 30
_MAX_LENGTH = 64
# A resource name as the API validates it: an optional DNS prefix, then a qualified name.
_RESOURCE_NAME = re.compile(r"(?:[a-z0-9]([-a-z0-9.]*[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?")


class RequestError(DevctlError):
    """A request that cannot be read (a bad quantity, a word that is not ``NAME=QUANTITY``, a pod without
    containers); ``subject`` is what it was about (the word, the container), the message one line."""

    kind = ErrorKind.MALFORMED

    def __init__(self, message: str, subject: str | None = None):
        super().__init__(message)
        self.subject = subject


def parse_quantity(value: object) -> Fraction:
    """A Kubernetes quantity, exactly: ``"100m"`` -> 1/10, ``"1.5Gi"`` -> 1610612736, ``"1e3"`` -> 1000.

    YAML may hand over a number (``cpu: 2``, ``cpu: 0.5``): it reads as its decimal spelling. Negative values
    and exponents beyond 10^30 are refused (no request has them).
    """
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        what = _shown(value) if isinstance(value, bool) or value is None else _kind(value)
        raise RequestError(f"invalid quantity: {what} where a number like 2, 500m, 1.5Gi or 1e3 belongs")
    text = value if isinstance(value, str) else repr(value)
    if len(text) > _MAX_LENGTH:
        raise RequestError(f"invalid quantity: {len(text)} characters, more than {_MAX_LENGTH}")
    match = _NUMBER.match(text)
    if match is None:
        raise RequestError(f"invalid quantity {_shown(text)}: expected a number like 2, 500m, 1.5Gi or 1e3")
    sign, number, suffix = match.group(1), match.group(2), text[match.end() :]
    amount = Fraction(number) * _scale(suffix, text)
    if sign == "-" and amount != 0:
        raise RequestError(f"invalid quantity {_shown(text)}: a request cannot be negative")
    return amount


def _scale(suffix: str, text: str) -> Fraction:
    if suffix in _BINARY:
        return Fraction(1024 ** _BINARY[suffix])
    if suffix in _DECIMAL:
        return Fraction(10 ** _DECIMAL[suffix])
    if suffix == "m":
        return Fraction(1, 1000)
    exponent = _EXPONENT.fullmatch(suffix)
    if exponent is None:
        raise RequestError(
            f"invalid quantity {_shown(text)}: unknown suffix {_shown(suffix)} "
            "(Ki, Mi, Gi, Ti, Pi, Ei, m, k, M, G, T, P, E or an exponent like e3)"
        )
    power = int(exponent.group(1))
    if abs(power) > _MAX_EXPONENT:
        raise RequestError(f"invalid quantity {_shown(text)}: out of range")
    return Fraction(10) ** power


def amount_of(resource: str, quantity: Fraction) -> int:
    """A resource's quantity as the model holds it: CPU in millicores rounded up, the rest rounded up to whole
    units; an extended resource (a device) must be whole."""
    if resource == "cpu":
        return _ceil(quantity * 1000)
    if is_extended(resource) and quantity.denominator != 1:
        raise RequestError(f"{resource}: {_decimal(quantity)} is not a whole number of devices", resource)
    return _ceil(quantity)


def is_extended(resource: str) -> bool:
    """A resource outside the kubernetes.io namespace (``nvidia.com/gpu``): counted, never divided."""
    if "/" not in resource:
        return False
    domain = resource.split("/", 1)[0]
    return not (domain == "kubernetes.io" or domain.endswith(".kubernetes.io"))


def _ceil(value: Fraction) -> int:
    return -(-value.numerator // value.denominator)


def _decimal(value: Fraction) -> str:
    return str(value.numerator) if value.denominator == 1 else f"{float(value):g}"


def _shown(value: object) -> str:
    """A value for a message: a string or number quoted (cut at 40 characters), anything else only by its type:
    ``str()`` of a YAML alias bomb (a list of 9 lists of 9 ... sharing one object) would build gigabytes."""
    if isinstance(value, str):
        return repr(value if len(value) <= 40 else value[:40] + "…")
    if value is None or isinstance(value, (bool, int, float)):
        text = repr(value)
        return repr(text if len(text) <= 40 else text[:40] + "…")
    return _kind(value)


def _kind(value: object) -> str:
    """Only the type of a non-scalar value: ``a list``, ``a mapping``."""
    if isinstance(value, Mapping):
        return "a mapping"
    if isinstance(value, (list, tuple)):
        return "a list"
    return f"a {type(value).__name__}"


# --- from a Pod manifest ---------------------------------------------------------------------------------------


def pod_request(manifest: Mapping[str, object]) -> PodRequest:
    """The pod as admission sees it: init containers first (``restartPolicy: Always`` ones restartable), then
    the app containers, each with its requests (defaulted from limits) and limits; the QoS class as v1.32
    decides it. Raises RequestError for a pod the API server would refuse (no containers, a bad quantity)."""
    spec = manifest.get("spec")
    if not isinstance(spec, Mapping):
        raise RequestError("the pod has no spec")
    meta = manifest.get("metadata")
    meta = meta if isinstance(meta, Mapping) else {}
    exact: list[tuple[dict[str, Fraction], dict[str, Fraction]]] = []
    containers: list[ContainerRequest] = []
    for key, init in (("initContainers", True), ("containers", False)):
        for item in _list(spec.get(key), key):
            name = item.get("name")
            if not isinstance(name, str) or not name:
                raise RequestError(f"a container in {key} has no name")
            requests, limits = _resources(item.get("resources"), name)
            exact.append((requests, limits))
            containers.append(
                ContainerRequest(
                    name=name,
                    init=init,
                    restartable=init and item.get("restartPolicy") == "Always",
                    requests={r: amount_of(r, q) for r, q in requests.items()},
                    limits={r: amount_of(r, q) for r, q in limits.items()},
                )
            )
    if not any(not c.init for c in containers):
        raise RequestError("the pod has no containers")
    pod_level = spec.get("resources")
    qos = qos_class([_resources(pod_level, "the pod")] if pod_level is not None else exact)
    return PodRequest(
        containers=tuple(containers),
        qos=qos,
        namespace=_text(meta.get("namespace"), "default"),
        name=_text(meta.get("name"), "fit"),
        uid=_text(meta.get("uid"), ""),
    )


def _list(value: object, key: str) -> list[Mapping[str, object]]:
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(item, Mapping) for item in value):
        raise RequestError(f"spec.{key} is not a list of containers")
    return list(value)


def _resources(value: object, owner: str) -> tuple[dict[str, Fraction], dict[str, Fraction]]:
    """(requests, limits) exactly, requests defaulted from limits as the API server does."""
    if value is None:
        return {}, {}
    if not isinstance(value, Mapping):
        raise RequestError(f"{owner}: resources is not a mapping", owner)
    requests = _quantities(value.get("requests"), owner, "requests")
    limits = _quantities(value.get("limits"), owner, "limits")
    for resource, limit in limits.items():
        requests.setdefault(resource, limit)
    return requests, limits


def _quantities(value: object, owner: str, which: str) -> dict[str, Fraction]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise RequestError(f"{owner}: resources.{which} is not a mapping", owner)
    out: dict[str, Fraction] = {}
    for resource, quantity in value.items():
        if not isinstance(resource, str) or not _RESOURCE_NAME.fullmatch(resource):
            raise RequestError(f"{owner}: {_shown(resource)} is not a resource name", owner)
        try:
            out[resource] = parse_quantity(quantity)
        except RequestError as err:
            raise RequestError(f"{owner}: {which} {resource}: {err}", owner) from None
        amount_of(resource, out[resource])  # a fraction of a device is refused here, naming it
    return out


def _text(value: object, default: str) -> str:
    return value if isinstance(value, str) and value else default


def qos_class(containers: Iterable[tuple[Mapping[str, Fraction], Mapping[str, Fraction]]]) -> str:
    """``GetPodQOS`` of v1.32 over each container's (requests, limits), exact quantities."""
    requests: dict[str, Fraction] = {}
    limits: dict[str, Fraction] = {}
    guaranteed = True
    for container_requests, container_limits in containers:
        for resource in _QOS_RESOURCES:
            request = container_requests.get(resource, Fraction(0))
            if request > 0:
                requests[resource] = requests.get(resource, Fraction(0)) + request
        found = set()
        for resource in _QOS_RESOURCES:
            limit = container_limits.get(resource, Fraction(0))
            if limit > 0:
                found.add(resource)
                limits[resource] = limits.get(resource, Fraction(0)) + limit
        if found != set(_QOS_RESOURCES):
            guaranteed = False
    if not requests and not limits:
        return BEST_EFFORT
    if guaranteed and requests == limits:
        return GUARANTEED
    return BURSTABLE


# --- from words ------------------------------------------------------------------------------------------------


def request_from_words(words: Sequence[str], name: str = "main") -> PodRequest:
    """``["nvidia.com/gpu=2", "cpu=8", "memory=32Gi"]`` -> one container ``main`` with requests equal to limits.

    The QoS class is still the kubelet's: Guaranteed when both CPU and memory are given (the CPU manager's
    exclusive CPUs need it), BestEffort for devices alone, Burstable otherwise. A bad word raises RequestError
    naming it (``subject`` is the word).
    """
    if not words:
        raise RequestError("no request given: name resources like nvidia.com/gpu=2 cpu=8 memory=32Gi")
    exact: dict[str, Fraction] = {}
    for word in words:
        resource, equals, quantity = word.partition("=")
        resource = resource.strip()
        if not equals or not resource or not quantity.strip():
            raise RequestError(f"{_shown(word)} is not NAME=QUANTITY (like nvidia.com/gpu=2 or memory=32Gi)", word)
        if not _RESOURCE_NAME.fullmatch(resource):
            raise RequestError(f"{_shown(word)}: {_shown(resource)} is not a resource name", word)
        if resource in exact:
            raise RequestError(f"{_shown(word)}: {resource} is asked for twice", word)
        try:
            exact[resource] = parse_quantity(quantity.strip())
            amount_of(resource, exact[resource])
        except RequestError as err:
            raise RequestError(f"{_shown(word)}: {err}", word) from None
    amounts = {r: amount_of(r, q) for r, q in exact.items()}
    container = ContainerRequest(name=name, requests=amounts, limits=dict(amounts))
    return PodRequest(containers=(container,), qos=qos_class([(exact, exact)]))
