output "function_url" {
  description = "The gateway's public base URL (sign requests with SigV4: the URL's auth type is AWS_IAM)."
  value       = module.gateway.function_url
}

output "queue_url" {
  description = "The continuation queue."
  value       = module.gateway.queue_url
}

output "bucket_name" {
  description = "The bucket of async results."
  value       = module.gateway.bucket_name
}
