variable "subscription_id" {
  description = "The Azure subscription to deploy into."
  type        = string
}

variable "name" {
  description = "Base name of the resources (3-22 lowercase letters, digits and hyphens)."
  type        = string
  default     = "fngateway"
}

variable "location" {
  description = "An Azure region that offers Flex Consumption."
  type        = string
  default     = "swedencentral"
}

variable "hosts" {
  description = "The backends' base URLs, tried in this order."
  type        = list(string)
}
