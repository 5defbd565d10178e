"""Server variants: each model also loaded with other server arguments, measured on the same cells."""
