# Deploys the gateway to AWS Lambda behind a Function URL. Build the zip
# first: make package-aws (dist/aws-lambda.zip: bootstrap built for the
# module's default architecture, arm64). Step by step: docs/deploy-aws.md.

provider "aws" {
  region = var.region
}

module "gateway" {
  source = "../../aws"

  name         = var.name
  package_path = "${path.root}/../../../dist/aws-lambda.zip"
  # architecture: the module's default (arm64), the one make package-aws
  # builds for; set both together (docs/deploy-aws.md).

  lambda_timeout         = 120
  function_url_auth_type = "AWS_IAM"
  invoke_mode            = "BUFFERED"

  hosts                 = var.hosts
  async_mode_enabled    = true
  async_trigger_timeout = var.async_trigger_timeout
  timeout               = 60000
  user_profiles = jsonencode([
    { userId = "batch", "async-config" = { enabled = true, topic = "${var.name}-batch-events" } },
  ])
}
