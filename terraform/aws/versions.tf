terraform {
  # 1.9: variable validations may refer to other variables.
  required_version = ">= 1.9"

  # The lowest version is the newest one any argument needs: see
  # terraform/schema_test.go's newerThanSchema (aws_lambda_permission's
  # invoked_via_function_url came with 6.28.0).
  required_providers {
    aws = {
      source  = "hashicorp/aws"
      version = "~> 6.28"
    }
  }
}
