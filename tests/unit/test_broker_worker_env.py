"""The replica index a pod's environment gives ``vf worker`` (``replica_from_env``).

``VF_REPLICA`` first, then an Indexed Job's ``JOB_COMPLETION_INDEX``, then a
StatefulSet pod's ordinal (the number after the last ``-`` of ``POD_NAME``, else
of ``HOSTNAME``); None when nothing gives one. An explicit index that is not a
number is an error, never a silent 0; a name without an ordinal gives None.
"""

from __future__ import annotations

import pytest

from vfadapters.broker.worker import replica_from_env


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        pytest.param({}, None, id="nothing-set"),
        pytest.param({"VF_REPLICA": "0"}, 0, id="vf-replica-0"),
        pytest.param({"VF_REPLICA": "3"}, 3, id="vf-replica"),
        pytest.param({"VF_REPLICA": " 4 "}, 4, id="vf-replica-whitespace"),
        pytest.param({"VF_REPLICA": "007"}, 7, id="vf-replica-leading-zeros"),
        pytest.param({"JOB_COMPLETION_INDEX": "5"}, 5, id="indexed-job"),
        pytest.param({"POD_NAME": "traffic-tracker-2"}, 2, id="statefulset-pod-name"),
        pytest.param({"POD_NAME": "tracker-0"}, 0, id="statefulset-ordinal-0"),
        pytest.param({"POD_NAME": "tracker-12"}, 12, id="statefulset-two-digits"),
        pytest.param({"HOSTNAME": "traffic-tracker-1"}, 1, id="hostname-fallback"),
        # precedence: VF_REPLICA > JOB_COMPLETION_INDEX > POD_NAME > HOSTNAME
        pytest.param(
            {
                "VF_REPLICA": "1",
                "JOB_COMPLETION_INDEX": "2",
                "POD_NAME": "x-3",
                "HOSTNAME": "x-4",
            },
            1,
            id="vf-replica-wins",
        ),
        pytest.param(
            {"JOB_COMPLETION_INDEX": "2", "POD_NAME": "x-3", "HOSTNAME": "x-4"},
            2,
            id="job-index-beats-pod-name",
        ),
        pytest.param({"POD_NAME": "x-3", "HOSTNAME": "x-4"}, 3, id="pod-name-beats-hostname"),
        pytest.param({"VF_REPLICA": "", "POD_NAME": "x-3"}, 3, id="empty-vf-replica-is-unset"),
        pytest.param(
            {"VF_REPLICA": "  ", "JOB_COMPLETION_INDEX": "6"}, 6, id="blank-vf-replica-is-unset"
        ),
        # names without an ordinal: None (the worker then runs replica 0)
        pytest.param({"POD_NAME": "tracker"}, None, id="pod-name-without-dash"),
        pytest.param({"HOSTNAME": "build01"}, None, id="hostname-without-dash"),
        pytest.param(
            {"POD_NAME": "traffic-tracker-7f9c4d-xk2lp"}, None, id="deployment-pod-random-suffix"
        ),
        pytest.param({"POD_NAME": "tracker-"}, None, id="trailing-dash"),
        pytest.param({"HOSTNAME": "my-laptop"}, None, id="hostname-word-suffix"),
        # a pod name without an ordinal falls through to HOSTNAME
        pytest.param(
            {"POD_NAME": "tracker-abc", "HOSTNAME": "tracker-5"}, 5, id="pod-name-falls-through"
        ),
    ],
)
def test_replica_from_env(env: dict[str, str], expected: int | None) -> None:
    assert replica_from_env(env) == expected


@pytest.mark.parametrize(
    ("env", "key"),
    [
        pytest.param({"VF_REPLICA": "abc"}, "VF_REPLICA", id="vf-replica-word"),
        pytest.param({"VF_REPLICA": "-1"}, "VF_REPLICA", id="vf-replica-negative"),
        pytest.param({"VF_REPLICA": "1.5"}, "VF_REPLICA", id="vf-replica-float"),
        pytest.param({"VF_REPLICA": "0x2"}, "VF_REPLICA", id="vf-replica-hex"),
        pytest.param({"JOB_COMPLETION_INDEX": "abc"}, "JOB_COMPLETION_INDEX", id="job-word"),
        pytest.param({"JOB_COMPLETION_INDEX": "1e3"}, "JOB_COMPLETION_INDEX", id="job-exponent"),
        # an explicit bad value is not skipped for the next source
        pytest.param(
            {"VF_REPLICA": "two", "JOB_COMPLETION_INDEX": "2"}, "VF_REPLICA", id="no-fallthrough"
        ),
        pytest.param(
            {"JOB_COMPLETION_INDEX": "x", "POD_NAME": "tracker-2"},
            "JOB_COMPLETION_INDEX",
            id="no-fallthrough-to-pod-name",
        ),
    ],
)
def test_a_non_numeric_explicit_index_is_an_error_naming_the_variable(
    env: dict[str, str], key: str
) -> None:
    with pytest.raises(ValueError, match=key) as info:
        replica_from_env(env)
    assert repr(env[key].strip()) in str(info.value)


def test_reads_the_process_environment_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    for key in ("VF_REPLICA", "JOB_COMPLETION_INDEX", "POD_NAME"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("HOSTNAME", "no-ordinal")
    assert replica_from_env() is None
    monkeypatch.setenv("POD_NAME", "traffic-tracker-2")
    assert replica_from_env() == 2
    monkeypatch.setenv("VF_REPLICA", "9")
    assert replica_from_env() == 9


@pytest.mark.parametrize("value", ["²", "①", "٣x"])
def test_unicode_digit_lookalikes_are_named_errors(value: str) -> None:
    # str.isdigit() accepts "²" and "①" but int() does not: the error must still name
    # the variable (what vf worker shows as invalid-replica), not int()'s own message
    with pytest.raises(ValueError, match="VF_REPLICA"):
        replica_from_env({"VF_REPLICA": value})


def test_a_pod_name_ending_in_a_digit_lookalike_has_no_ordinal() -> None:
    assert replica_from_env({"POD_NAME": "tracker-²"}) is None
