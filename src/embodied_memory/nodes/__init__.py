"""Thin ROS 2 nodes: each converts messages and calls the ROS-free core. Only this package
imports rclpy."""
