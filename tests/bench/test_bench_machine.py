"""The machine a timing benchmark ran on (`bench.machine`), written beside its figures."""

from bench import machine


def test_the_description_names_the_processor_the_cores_the_load_and_a_timed_loop():
    described = machine.describe()
    assert set(described) == {"processor", "cores", "load_average", "python_loop_us"}
    assert described["processor"]
    assert described["cores"] >= 1
    assert len(described["load_average"]) == 3
    assert described["python_loop_us"] > 0


def test_the_timed_loop_is_the_best_of_its_tries(monkeypatch):
    # a busy moment in one try must not count: the fastest try is the machine's speed
    monkeypatch.setattr(machine.timeit, "repeat", lambda *args, **kwargs: [0.9, 0.05, 0.4])
    assert machine.python_loop_us(tries=3, per_try=50) == 1000.0  # 0.05 s / 50 runs


def test_the_processor_is_named_even_without_cpuinfo(monkeypatch):
    def no_file(*args, **kwargs):
        raise OSError("no /proc here")

    monkeypatch.setattr("builtins.open", no_file)
    assert machine.processor()
