from jobpulse.agent.base import CounterRates, Sample, count_cpu_list, finite, parse_keyed


def test_first_update_gives_no_rate():
    rates = CounterRates()
    assert rates.update(0.0, {"eth0": 1000}) is None


def test_rate_is_delta_over_time():
    rates = CounterRates()
    rates.update(10.0, {"a": 1000, "b": 50})
    assert rates.update(12.0, {"a": 3000, "b": 250}) == (2000 + 200) / 2.0


def test_counter_that_went_backwards_is_left_out_and_restarts():
    rates = CounterRates()
    rates.update(0.0, {"a": 1000, "b": 5000})
    assert rates.update(1.0, {"a": 1500, "b": 10}) == 500.0  # b was reset
    assert rates.update(2.0, {"a": 1500, "b": 110}) == 100.0  # b counts again from 10


def test_all_counters_reset_gives_no_rate():
    rates = CounterRates()
    rates.update(0.0, {"a": 1000})
    assert rates.update(1.0, {"a": 3}) is None


def test_new_counters_count_from_zero_when_asked():
    rates = CounterRates(new_from_zero=True)
    rates.update(0.0, {1: 5.0})
    assert rates.update(1.0, {1: 6.0, 2: 0.5}) == 1.5


def test_new_counters_are_ignored_by_default():
    rates = CounterRates()
    rates.update(0.0, {"eth0": 100})
    assert rates.update(1.0, {"eth0": 200, "eth1": 10**9}) == 100.0


def test_time_not_advancing_gives_no_rate():
    rates = CounterRates()
    rates.update(5.0, {"a": 1})
    assert rates.update(5.0, {"a": 2}) is None


def test_cpu_list_counts_ranges_and_singles():
    assert count_cpu_list("0-3,8-11,15\n") == 9
    assert count_cpu_list("") is None


def test_parse_keyed_skips_non_numbers():
    assert parse_keyed("usage_usec 10\nbad x\nnr_periods 3\n") == {"usage_usec": 10, "nr_periods": 3}


def test_finite_drops_nan_and_infinity():
    samples = [Sample("a", "", 1.0), Sample("b", "", float("nan")), Sample("c", "", float("inf"))]
    assert finite(samples) == [Sample("a", "", 1.0)]
