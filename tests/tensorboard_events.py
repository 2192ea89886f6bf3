"""Read TensorBoard event files back, independently of the writer: the TFRecord framing (length, masked CRC-32C of
the length, payload, masked CRC-32C of the payload, every CRC checked) and tensorboardX's `Event` protobuf."""

from __future__ import annotations

import struct
from pathlib import Path

from tensorboardX.proto.event_pb2 import Event


def _crc32c_table() -> list[int]:
    table = []
    for byte in range(256):
        crc = byte
        for _ in range(8):
            crc = (crc >> 1) ^ 0x82F63B78 if crc & 1 else crc >> 1  # Castagnoli polynomial, reflected
        table.append(crc)
    return table


_TABLE = _crc32c_table()


def masked_crc32c(data: bytes) -> int:
    """TFRecord's checksum: CRC-32C, rotated right by 15 bits, plus a constant."""
    crc = 0xFFFFFFFF
    for byte in data:
        crc = _TABLE[(crc ^ byte) & 0xFF] ^ (crc >> 8)
    crc ^= 0xFFFFFFFF
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def read_records(path: Path) -> list[bytes]:
    """The payloads of a TFRecord file; AssertionError on a bad checksum or a truncated record."""
    blob, offset, records = path.read_bytes(), 0, []
    while offset < len(blob):
        header = blob[offset:offset + 8]
        (length,) = struct.unpack("<Q", header)
        (length_crc,) = struct.unpack("<I", blob[offset + 8:offset + 12])
        assert length_crc == masked_crc32c(header), f"{path}: bad length checksum at byte {offset}"
        payload = blob[offset + 12:offset + 12 + length]
        assert len(payload) == length, f"{path}: truncated record at byte {offset}"
        (payload_crc,) = struct.unpack("<I", blob[offset + 12 + length:offset + 16 + length])
        assert payload_crc == masked_crc32c(payload), f"{path}: bad payload checksum at byte {offset}"
        records.append(payload)
        offset += 16 + length
    return records


def read_events(path: Path) -> list[Event]:
    """Every Event of one event file, in order."""
    events = []
    for payload in read_records(path):
        event = Event()
        event.ParseFromString(payload)
        events.append(event)
    return events


def read_scalars(log_dir: Path) -> dict[str, dict[int, float]]:
    """tag -> {step: value} over every event file in `log_dir` (simple_value scalars)."""
    scalars: dict[str, dict[int, float]] = {}
    files = sorted(log_dir.glob("events.out.tfevents.*"))
    assert files, f"no event files in {log_dir}"
    for path in files:
        for event in read_events(path):
            for value in event.summary.value:
                if value.HasField("simple_value"):
                    scalars.setdefault(value.tag, {})[int(event.step)] = value.simple_value
    return scalars
