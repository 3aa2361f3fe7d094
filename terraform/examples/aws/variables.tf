variable "region" {
  description = "The AWS region to deploy into."
  type        = string
  default     = "eu-west-1"
}

variable "name" {
  description = "Base name of the resources (1-40 letters, digits, hyphens and underscores). Unique per account and region; the bucket's name gets a generated suffix, so the default collides with nothing outside your account."
  type        = string
  default     = "fngateway"
}

variable "hosts" {
  description = "The backends' base URLs, tried in this order."
  type        = list(string)
}

variable "async_trigger_timeout" {
  description = "AsyncTriggerTimeout, in ms: how long an async-eligible request waits for its backend before it is answered 202. 10000 is the gateway's default; 1 sends every async-eligible request async at once, to try the async API with a fast backend."
  type        = number
  default     = 10000
}

variable "alarm_email" {
  description = "The address the alarms notify (SNS sends it a confirmation message first; nothing is delivered until it is confirmed). null: the alarms are created and notify nobody."
  type        = string
  default     = null
}

variable "warm_settings" {
  description = "WARM settings kept in the settings source instead of the function's settings, keyed by setting name ({ DefaultTTLSecs = \"60\" }): changing them restarts nothing (docs/settings.md#reloading-settings-warm-and-cold). null: none."
  type        = map(string)
  default     = null
}
