// Command forwarder is the floor the gateway's Lambda cold start is measured
// against (BenchmarkColdStart, docs/performance.md): a minimal aws-lambda-go
// function that forwards each Function URL request to the backend BACKEND
// names with one http.Client call, and answers what it got. No settings, no
// deadline, no retry, no telemetry: only what any Go forwarder links.
package main

import (
	"context"
	"io"
	"net/http"
	"os"
	"strings"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambda"
)

func main() {
	backend := os.Getenv("BACKEND")
	client := &http.Client{}
	lambda.Start(func(ctx context.Context, ev events.LambdaFunctionURLRequest) (events.LambdaFunctionURLResponse, error) {
		req, err := http.NewRequestWithContext(ctx, ev.RequestContext.HTTP.Method, backend+ev.RawPath, strings.NewReader(ev.Body))
		if err != nil {
			return events.LambdaFunctionURLResponse{}, err
		}
		resp, err := client.Do(req)
		if err != nil {
			return events.LambdaFunctionURLResponse{StatusCode: http.StatusBadGateway}, nil
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			return events.LambdaFunctionURLResponse{StatusCode: http.StatusBadGateway}, nil
		}
		return events.LambdaFunctionURLResponse{StatusCode: resp.StatusCode, Body: string(body),
			Headers: map[string]string{"Content-Type": resp.Header.Get("Content-Type")}}, nil
	})
}
