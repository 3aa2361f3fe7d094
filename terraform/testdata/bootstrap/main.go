// Command bootstrap stands in for the gateway in TestLambdaArchitecture:
// make package-aws builds it with the gateway's own rule (LAMBDA_MAIN), so
// the test holds the rule's zip, executable and architecture without
// compiling the whole gateway for another processor.
package main

func main() {}
