// jsclient.cjs: submits an async request to the gateway and follows it with
// @azure/core-lro's createHttpPoller over an @azure/core-rest-pipeline
// pipeline, as a JavaScript Azure SDK client would.
//
// usage: node jsclient.cjs <submit URL> <operation|location>
//
// "operation" follows the 202's Operation-Location (what core-lro picks
// when the header is there); "location" hides that header from core-lro,
// which then polls Location. Prints one JSON line when the 202 arrives,
// {"event":"accepted","location":…}, and one when the poller ends:
// {"event":"done","outcome":"succeeded|failed|canceled","status":…,
// "contentType":…,"body":…,"error":…}. The modules come from NODE_PATH.
"use strict";

const { createHttpPoller } = require("@azure/core-lro");
const {
  createPipelineFromOptions,
  createDefaultHttpClient,
  createPipelineRequest,
  createHttpHeaders,
} = require("@azure/core-rest-pipeline");

const [url, mode] = process.argv.slice(2);
if (!url || !["operation", "location"].includes(mode)) {
  console.error("usage: node jsclient.cjs <submit URL> <operation|location>");
  process.exit(2);
}

const pipeline = createPipelineFromOptions({ retryOptions: { maxRetries: 0 } });
const client = createDefaultHttpClient();
let last; // the last response: status, content type, body text

async function send(method, target, body, headers) {
  const request = createPipelineRequest({
    url: target, method, body, headers: createHttpHeaders(headers || {}),
    allowInsecureConnection: true, // the gateway under test listens on plain HTTP (loopback)
  });
  const response = await pipeline.sendRequest(client, request);
  const text = response.bodyAsText ?? "";
  let parsed;
  try {
    parsed = text ? JSON.parse(text) : undefined;
  } catch {
    parsed = undefined;
  }
  const hdrs = response.headers.toJSON({ preserveCase: false });
  last = { status: response.status, contentType: hdrs["content-type"] || "", body: text };
  return { flatResponse: parsed, rawResponse: { statusCode: response.status, headers: hdrs, request: { url: target, method }, body: parsed } };
}

function print(obj) {
  process.stdout.write(JSON.stringify(obj) + "\n");
}

const lro = {
  sendInitialRequest: async () => {
    const res = await send("POST", url, "payload-123", { "S7PAsyncMode": "true", "X-UserProfile": "u1", "Content-Type": "text/plain" });
    print({ event: "accepted", status: res.rawResponse.statusCode, location: res.rawResponse.headers["location"] || "" });
    if (mode === "location") {
      delete res.rawResponse.headers["operation-location"];
    }
    return res;
  },
  sendPollRequest: (path) => send("GET", path),
};

(async () => {
  const poller = createHttpPoller(lro, { intervalInMs: 200 });
  try {
    await poller.pollUntilDone();
    print({ event: "done", outcome: poller.operationState.status, status: last.status, contentType: last.contentType, body: last.body });
  } catch (e) {
    const outcome = poller.operationState?.status ?? "error";
    print({ event: "done", outcome, status: last?.status ?? 0, contentType: last?.contentType ?? "", body: last?.body ?? "", error: String(e?.message ?? e) });
  }
})();
