terraform {
  # 1.9: variable validations may refer to other variables.
  required_version = ">= 1.9"

  # The lowest version is the newest one any argument needs: see
  # terraform/schema_test.go's newerThanSchema. The provider's CHANGELOG,
  # 6.28.0 (January 7, 2026): "resource/aws_lambda_permission: Add
  # invoked_via_function_url argument (#44858)"; 6.25-6.27 reject it.
  required_providers {
    aws = {
      source  = "hashicorp/aws"
      version = "~> 6.28"
    }
  }
}
