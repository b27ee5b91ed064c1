"""Shared fixtures: the small shipped model, the kvslim binary the same build made (for results
that must equal the CLI's), and a helper running it. CTest sets KVSLIM_BINARY and
KVSLIM_SOURCE_DIR (python/CMakeLists.txt); without them these tests fail rather than skip."""

import json
import os
import subprocess

import pytest

import kvslim


def _required_env(name):
    value = os.environ.get(name)
    if not value:
        pytest.fail(f"{name} is not set: run these tests through CTest (python/CMakeLists.txt sets it)")
    return value


@pytest.fixture(scope="session")
def source_dir():
    return _required_env("KVSLIM_SOURCE_DIR")


@pytest.fixture(scope="session")
def model_path(source_dir):
    return os.path.join(source_dir, "models", "kvslim-small.gguf")


@pytest.fixture(scope="session")
def template_path(source_dir):
    return os.path.join(source_dir, "tests", "data", "chat-template.jinja")


@pytest.fixture(scope="session")
def model(model_path):
    return kvslim.Model(model_path, threads=2, ctx=2048)


@pytest.fixture(scope="session")
def cli():
    binary = _required_env("KVSLIM_BINARY")

    def run(*args, json_out=True):
        done = subprocess.run([binary, *map(str, args)], capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout) if json_out else done.stdout

    return run


# A prompt long enough for the methods to evict (the small model's vocabulary is bytes and
# merges of English text), the same for the Python call and the CLI.
LONG_PROMPT = " ".join(f"The code of box {i} is {(i * 7919) % 1000}." for i in range(60)) + " The code of box 17 is"
