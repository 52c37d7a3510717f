"""``%agio otel on|off``: export every run's spans to an OTLP endpoint (off by default)."""

from __future__ import annotations

from typing import Any

from . import arg, command


@command("otel", "OpenTelemetry export: `on [--endpoint URL] [--protocol grpc|http/protobuf]` sends a span per "
                 "run, model call and tool call to an OTLP endpoint (default: the OTEL_* variables); `off` stops",
         arg("action", choices=["on", "off"]), arg("--endpoint", default=None),
         arg("--protocol", default=None, choices=["grpc", "http/protobuf"]),
         arg("--service-name", default="agio-notebook"))
def otel(c: Any, args: Any) -> None:
    from ... import telemetry

    if args.action == "off":
        telemetry.disable()
        print("agio: OpenTelemetry export off")
        return
    active = telemetry.enable(args.endpoint, protocol=args.protocol, service_name=args.service_name)
    print(f"agio: exporting spans to {active.exporter.where}")
