"""An S3-compatible server for the storage tests: moto's server mode, started as its own process on
loopback, reached over HTTP by boto3 as any object store would be (nothing of the client is mocked).
"""

import os
import socket
import subprocess
import sys
import time
import urllib.request
import uuid
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

LOOPBACK = "127.0.0.1"
# moto accepts any credentials; these name the test's own.
ACCESS_KEY, SECRET_KEY, REGION = "readingroom-test", "readingroom-test-secret", "us-east-1"


@dataclass(frozen=True)
class S3Server:
    endpoint: str

    def client(self):
        import boto3

        return boto3.client(
            "s3",
            endpoint_url=self.endpoint,
            region_name=REGION,
            aws_access_key_id=ACCESS_KEY,
            aws_secret_access_key=SECRET_KEY,
        )

    def new_bucket(self) -> str:
        name = f"readingroom-{uuid.uuid4().hex[:12]}"
        self.client().create_bucket(Bucket=name)
        return name

    def keys(self, bucket: str) -> list[str]:
        listed = self.client().list_objects_v2(Bucket=bucket)
        return sorted(item["Key"] for item in listed.get("Contents", []))

    def settings(self, bucket: str) -> dict:
        """The settings (and environment) that point ReadingRoom's storages at this bucket."""
        return {
            "READINGROOM_STORAGE": "s3",
            "AWS_STORAGE_BUCKET_NAME": bucket,
            "AWS_S3_ENDPOINT_URL": self.endpoint,
            "AWS_S3_REGION_NAME": REGION,
            "AWS_ACCESS_KEY_ID": ACCESS_KEY,
            "AWS_SECRET_ACCESS_KEY": SECRET_KEY,
        }


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind((LOOPBACK, 0))
        return probe.getsockname()[1]


@contextmanager
def running_s3_server():
    port = _free_port()
    server = Path(sys.executable).with_name("moto_server")
    process = subprocess.Popen(  # noqa: S603 (no shell; the project's own venv)
        [server, "-H", LOOPBACK, "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ, "MOTO_ALLOW_NONEXISTENT_REGION": "true"},
    )
    endpoint = f"http://{LOOPBACK}:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                urllib.request.urlopen(f"{endpoint}/moto-api/", timeout=1)  # noqa: S310 (loopback)
                break
            except OSError:
                if process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("moto_server did not start") from None
                time.sleep(0.1)
        yield S3Server(endpoint)
    finally:
        process.terminate()
        process.wait(timeout=10)
