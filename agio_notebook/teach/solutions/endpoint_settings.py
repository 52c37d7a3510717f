"""endpoint_settings: the endpoint, the environment's key, settings per agent, limits on silence."""

ENTRY = "connect"
SOURCE = '''
from agio_notebook import Agent, ExecutionConfig, OpenAIModel

def connect(base_url):
    model = OpenAIModel("tutor-1", base_url=base_url)       # the key comes from OPENAI_API_KEY
    return Agent(model=model, model_settings={"temperature": 0, "max_tokens": 200},
                 config=ExecutionConfig(first_token_timeout=2, idle_timeout=2))
'''
