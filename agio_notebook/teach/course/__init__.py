"""The course's exercises, one module per topic (``teach.catalog`` lists them in course order)."""
