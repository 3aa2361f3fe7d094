output "function_url" {
  description = "The gateway's public base URL (sign requests with SigV4: the URL's auth type is AWS_IAM)."
  value       = module.gateway.function_url
}

output "region" {
  description = "The region the gateway runs in (SigV4 signs for it)."
  value       = var.region
}

output "function_name" {
  description = "The Lambda function (for its logs: /aws/lambda/<function_name>)."
  value       = module.gateway.function_name
}

output "queue_url" {
  description = "The continuation queue."
  value       = module.gateway.queue_url
}

output "bucket_name" {
  description = "The bucket of async results."
  value       = module.gateway.bucket_name
}

output "batch_events_queue_url" {
  description = "The SQS FIFO queue subscribed to the batch profile's notification topic: each request's Queued, Processing, AsyncProcessed / Failed / Expired, in order."
  value       = aws_sqs_queue.batch_events.url
}

output "notification_topic_arns" {
  description = "The profiles' SNS FIFO notification topics, by name."
  value       = module.gateway.notification_topic_arns
}

output "settings_source" {
  description = "With warm_settings: where the gateway reads them from (its SettingsSource); null otherwise."
  value       = module.gateway.settings_source
}
