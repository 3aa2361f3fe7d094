terraform {
  # 1.9: variable validations may refer to other variables.
  required_version = ">= 1.9"

  required_providers {
    azurerm = {
      source = "hashicorp/azurerm"
      # 4.55.0: the schema terraform/schema_test.go holds the module against.
      version = "~> 4.55"
    }
    azapi = {
      source = "Azure/azapi"
      # 2.x: azapi_resource_action's PUT (main.tf, app_settings); the
      # arguments terraform/schema_test.go holds it against (azapiSchema).
      version = "~> 2.0"
    }
  }
}
