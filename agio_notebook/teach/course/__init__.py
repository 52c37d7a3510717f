"""The course's exercises, one module per topic; ``catalog`` lists them in course order."""
