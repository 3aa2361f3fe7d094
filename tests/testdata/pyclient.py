"""pyclient.py: submits an async request to the gateway and follows it with
azure-core's LROPoller and LROBasePolling, as a Python Azure SDK client would.

usage: python3 pyclient.py <submit URL> <operation|location> <bare|redirect>

"operation" polls the 202's Operation-Location (OperationResourcePolling, what
LROBasePolling picks when the header is there); "location" polls Location
(LocationPolling). "bare" is a pipeline without RedirectPolicy; "redirect"
adds it. Prints one JSON line when the 202 arrives,
{"event":"accepted","location":...}, and one when the poller ends:
{"event":"done","outcome":"succeeded|failed|canceled","status":...,
"contentType":...,"body":...,"error":...}.
"""

import json
import sys

from azure.core import PipelineClient
from azure.core import __version__ as azure_core_version
from azure.core.exceptions import AzureError
from azure.core.pipeline.policies import RedirectPolicy, RequestIdPolicy
from azure.core.polling import LROPoller
from azure.core.polling.base_polling import (
    LocationPolling,
    LROBasePolling,
    OperationResourcePolling,
)
from azure.core.rest import HttpRequest


def emit(obj):
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def main():
    if len(sys.argv) != 4 or sys.argv[2] not in ("operation", "location") or sys.argv[3] not in ("bare", "redirect"):
        sys.stderr.write(__doc__)
        return 2
    url, mode, pipeline = sys.argv[1:]
    policies = [RequestIdPolicy()]
    if pipeline == "redirect":
        policies.append(RedirectPolicy())
    client = PipelineClient(base_url=url, policies=policies)
    request = HttpRequest(
        "POST", url, content=b"payload-123",
        headers={"S7PAsyncMode": "true", "X-UserProfile": "u1", "Content-Type": "text/plain"},
    )
    initial = client.send_request(request, _return_pipeline_response=True)
    emit({"event": "accepted", "status": initial.http_response.status_code,
          "location": initial.http_response.headers.get("Location", ""), "azureCore": azure_core_version})
    algorithm = OperationResourcePolling() if mode == "operation" else LocationPolling()
    method = LROBasePolling(timeout=0.2, lro_algorithms=[algorithm])
    poller = LROPoller(client, initial, lambda pr: pr.http_response, method)
    try:
        response = poller.result(timeout=120)
    except AzureError as e:
        last = getattr(e, "response", None)
        emit({"event": "done", "outcome": str(poller.status()).lower(),
              "status": getattr(last, "status_code", 0) or 0,
              "contentType": last.headers.get("Content-Type", "") if last is not None else "",
              "body": last.text() if last is not None else "", "error": str(e)})
        return 0
    emit({"event": "done", "outcome": str(poller.status()).lower(), "status": response.status_code,
          "contentType": response.headers.get("Content-Type", ""), "body": response.text()})
    return 0


if __name__ == "__main__":
    sys.exit(main())
