variable "region" {
  description = "The AWS region to deploy into."
  type        = string
  default     = "eu-west-1"
}

variable "name" {
  description = "Base name of the resources."
  type        = string
  default     = "fngateway"
}

variable "hosts" {
  description = "The backends' base URLs, tried in this order."
  type        = list(string)
}
